#!/usr/bin/env bash
# binding_vs_mpi.sh: quorum_allreduce against MPI_Allreduce in one MPI program
# (perf/mpi_vs_quorum: both alternated on the same buffers) under the
# launcher's default binding and without binding, ROUNDS launches of each,
# alternating, so drift and neighbours hit both bindings alike.
#
#   perf/binding_vs_mpi.sh BUILD_DIR [mpi_vs_quorum options...]
#
# Under `mpirun -n 2` Open MPI binds each rank to one core (its default for
# two ranks; --report-bindings shows it, printed once); `--bind-to none` lets
# the ranks and their threads run anywhere. Each launch prints its own table
# (per size and placement: busbw of each library as the median over the
# program's rounds, the ratio quorum / MPI and the worst round's ratio).
# Builds nothing. Env: ROUNDS=3 launches per binding, NP=2.
# srun is not run: the private one-node Slurm of tests/tools/srun_test.sh uses
# TaskPlugin=task/none (no binding), so it would measure what --bind-to none does.
set -euo pipefail

if [[ $# -lt 1 || ! -d $1 ]]; then
  echo "usage: $0 BUILD_DIR [mpi_vs_quorum options...]   (env: ROUNDS=3 NP=2)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
shift
rounds=${ROUNDS:-3}
np=${NP:-2}
exe=$build/perf/mpi_vs_quorum
if [[ ! -x $exe ]]; then
  echo "$0: $exe is missing (build it first; it needs MPI)" >&2
  exit 2
fi

export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
mpirun_args=(--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -n "$np")
for ((r = 1; r <= rounds; ++r)); do
  for binding in default none; do
    extra=()
    [[ $binding == none ]] && extra=(--bind-to none)
    [[ $r == 1 ]] && extra+=(--report-bindings)
    echo "## launch $r, binding: $binding"
    mpirun "${mpirun_args[@]}" "${extra[@]}" "$exe" "$@" 2>&1
  done
done
