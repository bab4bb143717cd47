# Decode context parallelism (src/distributed): sharding and the merge always; the MPI
# transport where an MPI implementation is found, the NCCL transport where CUDA, NCCL and
# MPI are. ATTNSEL_MPI: AUTO (default, or the ATTNSEL_MPI environment variable), ON
# (required) or OFF.
if(DEFINED ENV{ATTNSEL_MPI} AND NOT DEFINED CACHE{ATTNSEL_MPI})
  set(_attnsel_mpi_default $ENV{ATTNSEL_MPI})
else()
  set(_attnsel_mpi_default AUTO)
endif()
set(ATTNSEL_MPI "${_attnsel_mpi_default}" CACHE STRING "Build DCP's MPI transport: AUTO, ON or OFF")

set(ATTNSEL_HAVE_MPI OFF)
if(NOT ATTNSEL_MPI STREQUAL "OFF")
  if(ATTNSEL_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS CXX)
  else()
    find_package(MPI QUIET COMPONENTS CXX)
  endif()
  if(MPI_CXX_FOUND)
    set(ATTNSEL_HAVE_MPI ON)
  endif()
endif()
if(ATTNSEL_HAVE_MPI)
  message(STATUS "attnsel: DCP over MPI ON (${MPIEXEC_EXECUTABLE})")
else()
  message(STATUS "attnsel: DCP over MPI OFF: no MPI found (Debian: apt-get install libopenmpi-dev openmpi-bin); "
                 "`attnsel run --dcp` will say so and its tests are not built")
endif()

set(ATTNSEL_HAVE_NCCL OFF)
if(ATTNSEL_HAVE_CUDA AND ATTNSEL_HAVE_MPI)
  find_path(ATTNSEL_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(ATTNSEL_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(ATTNSEL_NCCL_INCLUDE_DIR AND ATTNSEL_NCCL_LIBRARY)
    set(ATTNSEL_HAVE_NCCL ON)
  endif()
endif()
message(STATUS "attnsel: DCP over NCCL ${ATTNSEL_HAVE_NCCL}")

set(_dir ${PROJECT_SOURCE_DIR}/src/distributed)
add_library(attnsel_distributed STATIC
  ${_dir}/dcp_layout.cpp ${_dir}/kv_shard.cpp ${_dir}/partial_attention.cpp ${_dir}/merge_states.cpp
  ${_dir}/dcp_job.cpp)
attnsel_warnings(attnsel_distributed)
# One unity batch, as each layer's files are (cmake/AttnselLayers.cmake).
set_target_properties(attnsel_distributed PROPERTIES UNITY_BUILD ${ATTNSEL_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 32)
# A layer of its own (src/layers.txt): compiled against the internal headers it may use
# only; it links the library without taking the library's view of every layer.
attnsel_layer_include_root(distributed _root)
target_include_directories(attnsel_distributed PRIVATE ${_root})
target_link_libraries(attnsel_distributed PUBLIC $<LINK_ONLY:attnsel_static> PRIVATE attnsel_layer_base OpenMP::OpenMP_CXX)
if(ATTNSEL_HAVE_MPI)
  target_sources(attnsel_distributed PRIVATE ${_dir}/mpi_communicator.cpp)
  target_link_libraries(attnsel_distributed PRIVATE MPI::MPI_CXX)
else()
  target_sources(attnsel_distributed PRIVATE ${_dir}/mpi_unavailable.cpp)
endif()
if(ATTNSEL_HAVE_NCCL)
  target_sources(attnsel_distributed PRIVATE ${_dir}/nccl_communicator.cpp)
  target_include_directories(attnsel_distributed PRIVATE ${ATTNSEL_NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(attnsel_distributed PRIVATE ${ATTNSEL_NCCL_LIBRARY} MPI::MPI_CXX)
else()
  target_sources(attnsel_distributed PRIVATE ${_dir}/nccl_unavailable.cpp)
endif()
# The GPU merge kernel (src/kernels/attention/cuda/merge_states.cu) joins the library with the other
# CUDA kernels; without CUDA its entry point says why.
if(NOT ATTNSEL_HAVE_CUDA)
  target_sources(attnsel_distributed PRIVATE ${_dir}/cuda_merge_unavailable.cpp)
endif()

# The tests (a sibling directory) decide from this whether to run the MPI launches.
set(ATTNSEL_HAVE_MPI ${ATTNSEL_HAVE_MPI} PARENT_SCOPE)
