# `attnsel run --dcp R` under mpirun, on the CPU: the merged output matches the
# single-rank reference for 2 and 4 ranks, and bad configurations are refused with a clear
# message (no hang: every test is bounded). Root in a container needs Open MPI's consent
# variables; --oversubscribe lets 4 ranks share 2 cores.
if(NOT ATTNSEL_HAVE_MPI OR NOT TARGET attnsel_cli OR ATTNSEL_TESTS_CONCURRENCY_ONLY)
  return()
endif()
set(_mpirun ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG})
set(_mpi_env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMP_NUM_THREADS=1;ATTNSEL_LOG_LEVEL=off;ASAN_OPTIONS=detect_leaks=0")
# A small GQA 32/8 layer: every rank keeps whole shards of tokens, some sequences are short.
set(_small --num-heads 32 --num-kv-heads 8 --head-size 64 --num-layers 2 --batch 3 --context 203
           --decode-steps 2 --no-progress)

function(attnsel_mpi_test name ranks regex)
  add_test(NAME ${name} COMMAND ${_mpirun} ${ranks} $<TARGET_FILE:attnsel_cli> run ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 LABELS mpi ENVIRONMENT "${_mpi_env}"
                                          PASS_REGULAR_EXPRESSION "${regex}")
endfunction()

attnsel_mpi_test(dcp_mpi_2_ranks_match_single_rank 2 "Check: +passed" --dcp 2 ${_small})
attnsel_mpi_test(dcp_mpi_4_ranks_match_single_rank 4 "Check: +passed" --dcp 4 ${_small} --cp-kv-cache-interleave-size 4)
attnsel_mpi_test(dcp_mpi_2_ranks_fp8_hnd 2 "Check: +passed" --dcp 2 ${_small} --kv-cache-dtype fp8_e4m3 --layout HND
                 --cp-kv-cache-interleave-size 16)
attnsel_mpi_test(dcp_mpi_json 2 "\"passed\": true" --dcp 2 ${_small} --json)
attnsel_mpi_test(dcp_mpi_refuses_mismatched_ranks 3 "--dcp 2 needs 2 ranks, but 3 were started" --dcp 2 ${_small})
attnsel_mpi_test(dcp_mpi_refuses_heads_it_cannot_split 2 "q per kv attn heads \\(3\\) must be divisible by dcp world size"
                 --dcp 2 --num-heads 12 --num-kv-heads 4 --head-size 64 --num-layers 1 --batch 1 --context 20
                 --decode-steps 1 --no-progress)
attnsel_mpi_test(dcp_mpi_refuses_interleave_not_dividing_block 2 "divisible by cp_kv_cache_interleave_size \\(3\\)"
                 --dcp 2 ${_small} --cp-kv-cache-interleave-size 3)
# Two ranks started with different jobs (MPI's multiple-program launch): both refuse.
set(_rest --num-heads 32 --num-kv-heads 8 --head-size 64 --num-layers 1 --batch 2 --decode-steps 1 --no-progress)
add_test(NAME dcp_mpi_refuses_ranks_with_different_jobs
         COMMAND ${_mpirun} 1 $<TARGET_FILE:attnsel_cli> run --dcp 2 --context 100 ${_rest}
                 : ${MPIEXEC_NUMPROC_FLAG} 1 $<TARGET_FILE:attnsel_cli> run --dcp 2 --context 101 ${_rest})
set_tests_properties(dcp_mpi_refuses_ranks_with_different_jobs PROPERTIES
                     TIMEOUT 120 LABELS mpi ENVIRONMENT "${_mpi_env}"
                     PASS_REGULAR_EXPRESSION "the DCP ranks were given different jobs: rank\\(s\\) 1 differ")
# A backend whose kernel cannot run on this host (FLASH_ATTN's CUDA kernel, selected for a
# simulated Hopper on a machine without a GPU) is refused from its KernelInfo before any
# rank starts talking.
add_test(NAME dcp_refuses_kernel_not_available_here
         COMMAND $<TARGET_FILE:attnsel_cli> run --dcp 2 --platform cuda:9.0 ${_rest})
set_tests_properties(dcp_refuses_kernel_not_available_here PROPERTIES
                     TIMEOUT 60 LABELS mpi ENVIRONMENT "${_mpi_env}"
                     PASS_REGULAR_EXPRESSION "FLASH_ATTN's kernel is not available in this build on this host"
                     # Where the GPU kernel runs, nothing is refused: one process is one rank short.
                     SKIP_REGULAR_EXPRESSION "--dcp 2 needs 2 ranks, but 1 were started")
