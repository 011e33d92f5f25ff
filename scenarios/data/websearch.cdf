# WebSearch flow sizes: the web-search workload of the DCTCP paper
# (M. Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010), flow sizes measured in a
# production search cluster; the same distribution drives the pFabric (SIGCOMM 2013) and
# HPCC (SIGCOMM 2019) evaluations. Heavy-tailed: most flows are short, most bytes are in
# flows of 1 MB and more.
#
# Format (scenarios/data/*.cdf): lines starting with '#' are comments; every other line is
# `size_bytes cum_prob`: the fraction of flows no larger than size_bytes. Sizes increase,
# cum_prob never decreases and the last is 1. Between two points sizes are uniform (the CDF
# is linear), as in HPCC's traffic generator, so the mean flow size is
# sum((s[i-1] + s[i]) / 2 * (p[i] - p[i-1])) = 1711250 bytes.
#
# Where the points come from: the HPCC repository (Li et al., SIGCOMM 2019,
# github.com/alibaba-edu/High-Precision-Congestion-Control) ships this distribution as
# traffic_gen/WebSearch_distribution.txt, a piecewise-linear CDF with the probability in percent; the
# points below are those, with the percentages divided by 100. They are published data,
# re-typed here in our format; no code was taken.
0 0
10000 0.15
20000 0.2
30000 0.3
50000 0.4
80000 0.53
200000 0.6
1000000 0.7
2000000 0.8
5000000 0.9
10000000 0.97
30000000 1
