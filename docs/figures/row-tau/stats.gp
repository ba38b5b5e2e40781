# Written by: zepsctl stats --config cluster.conf --plot row-tau
# gnuplot row-tau/stats.gp
set terminal pngcairo size 900,560 font ",11"
set datafile missing "?"
set termoption noenhanced
set grid
set key top left
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right top
set offsets 0, 0, graph 0.08, 0
set yrange [0:*]
set ylabel "count"
set xtics rotate by -45
set output "row-tau/tau.png"
set title "Staleness of applied pushes, per table"
set xlabel "tau (versions applied between the pull and the push)"
plot for [i=2:4] "row-tau/tau.dat" using i:xtic(1) title columnheader(i)
set output "row-tau/tau_ranks.png"
set title "Staleness of applied pushes, per rank"
set xlabel "tau (versions)"
plot for [i=2:5] "row-tau/tau_ranks.dat" using i:xtic(1) title columnheader(i)
set output "row-tau/clock_gap.png"
set title "Clock gap of applied pushes, per table"
set xlabel "clock gap (clocks)"
plot for [i=2:4] "row-tau/clock_gap.dat" using i:xtic(1) title columnheader(i)
set output "row-tau/pull_wait.png"
set title "How long pulls waited, per table"
set xlabel "wait (log2 buckets)"
plot for [i=2:4] "row-tau/pull_wait.dat" using i:xtic(1) title columnheader(i)
set output "row-tau/tau_by_freq.png"
set title "Per-row staleness of sparse tables, by row frequency"
set xlabel "touches of the row when pushed (log2 buckets)"
set ylabel "tau (versions)"
set style data linespoints
set xtics rotate by -45
set offsets 0.5, 0.5, graph 0.08, 0
set key inside left top
plot "row-tau/tau_by_freq.dat" index 0 using 1:4:xtic(2) with linespoints lc 1 dt 1 pt 5 lw 2 title "ctr_lin mean", \
     "row-tau/tau_by_freq.dat" index 0 using 1:5:xtic(2) with linespoints lc 1 dt 2 pt 6 lw 1 title "ctr_lin p50", \
     "row-tau/tau_by_freq.dat" index 0 using 1:6:xtic(2) with linespoints lc 1 dt 3 pt 7 lw 1 title "ctr_lin p90", \
     "row-tau/tau_by_freq.dat" index 0 using 1:7:xtic(2) with linespoints lc 1 dt 4 pt 8 lw 1 title "ctr_lin p99", \
     "row-tau/tau_by_freq.dat" index 1 using 1:4:xtic(2) with linespoints lc 2 dt 1 pt 5 lw 2 title "ctr_emb mean", \
     "row-tau/tau_by_freq.dat" index 1 using 1:5:xtic(2) with linespoints lc 2 dt 2 pt 6 lw 1 title "ctr_emb p50", \
     "row-tau/tau_by_freq.dat" index 1 using 1:6:xtic(2) with linespoints lc 2 dt 3 pt 7 lw 1 title "ctr_emb p90", \
     "row-tau/tau_by_freq.dat" index 1 using 1:7:xtic(2) with linespoints lc 2 dt 4 pt 8 lw 1 title "ctr_emb p99"
