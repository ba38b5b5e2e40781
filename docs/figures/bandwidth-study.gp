# bandwidth-study.gp - draws bandwidth-study.png from bandwidth-curves.dat,
# which deploy/local/bandwidth-study.sh writes: rank 0's test accuracy against
# wall time over a rate-limited link, per compression variant.
# Run in docs/figures: gnuplot -e "target=0.80; rate='100mbit'" bandwidth-study.gp
if (!exists("target")) target = 0.80
if (!exists("rate")) rate = "100mbit"
set terminal pngcairo size 760,460 font "DejaVu Sans,10"
set output "bandwidth-study.png"
set grid
set xlabel "seconds since training started"
set ylabel "test accuracy (rank 0)"
set yrange [0.4:0.9]
set title sprintf("mlp Fashion-MNIST, bsp, 4 workers | 2 servers over %s each way (tc tbf)", rate)
set key bottom right box opaque
set arrow from graph 0, first target to graph 1, first target nohead dt 2 lc rgb "gray40"
plot "bandwidth-curves.dat" index 0 using 1:3 with linespoints pt 7 ps 0.5 lw 2 lc rgb "#000000" title "none (f32 both ways)", \
     "" index 1 using 1:3 with linespoints pt 7 ps 0.5 lw 2 lc rgb "#ff7f0e" title "topk 1% + EF pushes", \
     "" index 2 using 1:3 with linespoints pt 7 ps 0.5 lw 2 lc rgb "#1f77b4" title "topk 1% + EF pushes and pulls"
