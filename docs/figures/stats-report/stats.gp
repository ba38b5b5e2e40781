# Written by: zepsctl stats --config /tmp/sp/cluster.conf --plot stats-report
# gnuplot stats-report/stats.gp
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
set output "stats-report/tau.png"
set title "Staleness of applied pushes, per table"
set xlabel "tau (versions applied between the pull and the push)"
plot for [i=2:5] "stats-report/tau.dat" using i:xtic(1) title columnheader(i)
set output "stats-report/tau_ranks.png"
set title "Staleness of applied pushes, per rank"
set xlabel "tau (versions)"
plot for [i=2:5] "stats-report/tau_ranks.dat" using i:xtic(1) title columnheader(i)
set output "stats-report/clock_gap.png"
set title "Clock gap of applied pushes, per table"
set xlabel "clock gap (clocks)"
plot for [i=2:5] "stats-report/clock_gap.dat" using i:xtic(1) title columnheader(i)
set output "stats-report/pull_wait.png"
set title "How long pulls waited, per table"
set xlabel "wait (log2 buckets)"
plot for [i=2:5] "stats-report/pull_wait.dat" using i:xtic(1) title columnheader(i)
