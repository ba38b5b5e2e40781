# compression-study.gp - draws compression-study.png from compression-curves.dat,
# which deploy/local/compression-study.sh writes: rank 0's curve (evaluated
# on the parameters it pulled) against the push payload bytes rank 0 has sent
# so far, for each push codec with and without error feedback.
# Run in docs/figures: gnuplot compression-study.gp
set terminal pngcairo size 1200,860 font "DejaVu Sans,9"
set output "compression-study.png"
set multiplot layout 2,2
set grid
set logscale x
set format x "10^{%L}"
set xlabel "push payload MB sent by rank 0 (wire)"
dat = "compression-curves.dat"
names = "none topk-1%+EF topk-1%,no-EF sign+EF sign,no-EF"
colors = "#000000 #1f77b4 #1f77b4 #d62728 #d62728"
dashes = "1 1 2 1 2"
set key top right box opaque
do for [q = 0:1] {
    set logscale y
    set format y "10^{%L}"
    set ylabel "|x - x*| / |x*|"
    set title sprintf("quadratic d = 1000, {/Symbol k} = 100, %s", q == 0 ? "bsp" : "async")
    plot for [v = 0:4] dat index (q * 5 + v) using 1:4 with linespoints pt 7 ps 0.4 \
        lc rgb word(colors, v + 1) dt int(word(dashes, v + 1)) lw 2 title word(names, v + 1)
}
unset logscale y
set format y "%g"
set key bottom right
do for [q = 0:1] {
    set ylabel "test accuracy"
    set yrange [0.5:0.92]
    set title sprintf("mlp Fashion-MNIST, %s", q == 0 ? "bsp" : "async")
    plot for [v = 0:4] dat index (10 + q * 5 + v) using 1:5 with linespoints pt 7 ps 0.4 \
        lc rgb word(colors, v + 1) dt int(word(dashes, v + 1)) lw 2 title word(names, v + 1)
}
unset multiplot
