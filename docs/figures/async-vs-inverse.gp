# async-vs-inverse.gp - draws async-vs-inverse.png from async-vs-inverse.dat,
# the curves `zepsctl study` writes (--curves): rank 0's relative distance to
# x* against the applied updates (the slice version it pulled), for plain
# async and for weighted w = 1/(1+tau), both at lr = 1/L, 8 workers.
# Run in docs/figures: gnuplot async-vs-inverse.gp
set terminal pngcairo size 760,460 font "DejaVu Sans,10"
set output "async-vs-inverse.png"
set logscale xy
set format y "10^{%L}"
set format x "10^{%L}"
set xrange [1:20000]
set yrange [1e-6:1e17]
set xlabel "applied updates + 1 (slice version rank 0 pulled)"
set ylabel "|x - x*| / |x*|"
set title "quadratic d = 100, {/Symbol k} = 100, 8 workers, 1 ms lognormal delay, lr = 1/L = 1, seed 2"
set grid
set key at graph 0.98, graph 0.95 right top box opaque
set arrow from graph 0, first 1e-4 to graph 1, first 1e-4 nohead dt 2 lc rgb "gray40"
set label "threshold 10^{-4}" at first 1.3, first 3e-4 tc rgb "gray30"
plot "async-vs-inverse.dat" index 0 using ($1 + 1):3 with linespoints pt 7 ps 0.5 lw 2 lc rgb "#d62728" title "async, w = 1: diverged", \
     "" index 1 using ($1 + 1):3 with lines lw 2 lc rgb "#1f77b4" title "weighted, w = 1/(1+{/Symbol t})"
