# Written by: zepsctl study --inject --dir /tmp/tb-full/study
# gnuplot /tmp/tb-full/study/study.gp
set terminal pngcairo size 900,560 font ",11"
set datafile missing "?"
set termoption noenhanced
set grid
set key top left
set output "/tmp/tb-full/study/cost.png"
set logscale y
set title "Cost of staleness: quadratic d = 100, kappa = 100, 8 workers"
set xlabel "s (tau ~ U{0..s}, exact)"
set ylabel "applied updates to rel. distance 0.0001"
plot for [i=2:5] "/tmp/tb-full/study/cost.dat" using 0:i:xtic(1) with linespoints lw 2 title columnheader(i)
set output "/tmp/tb-full/study/stability.png"
set title "Largest stable lr (L = 1)"
set xlabel "fixed tau = s (plotted at s + 1)"
set ylabel "lr"
set logscale x 2
set xrange [0.8:*]
f(x) = 2*sin(pi/(4*(x-1)+2))
g(x) = 1/(2*x)
set samples 400
plot "/tmp/tb-full/study/stability.dat" using ($1+1):2:2:3 with yerrorbars lw 2 pt 7 title "zeps: stable .. unstable (bisection)", f(x) lw 2 title "2 sin(pi/(4s+2))", g(x) dt 2 lw 2 title "Theorem 2: 1/(2(1+s))"
