# Registers the executor kernel tests. include() this from test/executor/CMakeLists.txt, after
# reference_executor/kernels has been added; it uses sluice_add_test from test/CMakeLists.txt.
# Targets (and ctest names) it creates:
#   test_executor_reference  the float64 CPU references against hand-checked values and finite
#                            differences; no CUDA needed, so it is created in every build.
#   test_executor_kernels    the wrappers' argument checks, and (test_executor_kernels_gpu) every GPU
#                            kernel against the references; created when sluice_executor_kernels exists.
#                            Without a CUDA device the GPU test is reported as skipped.
#   test_executor_kernels_emulated
#                            every GPU case of test_executor_kernels on the CPU: the kernels' own sources, the
#                            attention kernels' tensor-core code included, under the CUDA emulation
#                            (emulation/cuda_emulation.hpp), so that they run in every build with the CUDA toolkit's
#                            headers, sanitized ones included.
#   test_executor_cuda_emulated
#                            test_executor_cuda's GPU cases on the CPU: the CUDA backend's sources, its kernels and
#                            its local and NCCL transports, with the runtime, cuBLAS and NCCL emulated.
sluice_add_test(test_executor_reference ${CMAKE_CURRENT_LIST_DIR}/test_executor_reference.cpp)
target_link_libraries(test_executor_reference PRIVATE sluice_executor_reference)

# A GPU test program: NAME's test cases that need no GPU as the ctest test NAME, its doctest suites "gpu" and
# "gpus:4" as NAME_gpu, which ctest reports as skipped where the devices are missing (gpu_test_main.cpp).
function(sluice_add_gpu_test name)
  add_executable(${name} ${ARGN} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gpu_test_main.cpp)
  target_link_libraries(${name} PRIVATE sluice::io doctest::doctest)
  sluice_target_defaults(${name})
  target_compile_options(${name} PRIVATE -Wno-unused-result)  # CHECK_THROWS discards [[nodiscard]] results
  sluice_test_optimisation(${name})
  add_test(NAME ${name} COMMAND ${name} --test-suite-exclude=gpu,gpus:4)
  add_test(NAME ${name}_gpu COMMAND ${name} --test-suite=gpu,gpus:4)
  set_tests_properties(${name}_gpu PROPERTIES SKIP_RETURN_CODE 77)
endfunction()

if(TARGET sluice_executor_kernels)
  sluice_add_gpu_test(test_executor_kernels ${CMAKE_CURRENT_LIST_DIR}/test_executor_kernels.cpp
                      ${CMAKE_CURRENT_LIST_DIR}/test_executor_kernels_rows.cpp)
  target_link_libraries(test_executor_kernels PRIVATE sluice_executor_kernels sluice_executor_reference)
endif()

# The kernels' cases on the CPU, wherever the CUDA toolkit's headers are, CUDA compiler or not: the sanitized
# build, which builds no CUDA code, runs them too.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  # Every kernel source rewritten for the emulation, built against the toolkit's headers alone: the emulation defines
  # the runtime calls it needs, in place of cudart, and its own attention_ptx.cuh and mma.h (the tensor-core code),
  # which its include directory, first on the path, puts before the sources' and the toolkit's.
  set(kernel_sources ${PROJECT_SOURCE_DIR}/reference_executor/kernels/src)
  set(backend_sources ${PROJECT_SOURCE_DIR}/reference_executor/src/cuda)
  # Rewrites SOURCE (a .cu file) for the emulation into OUTPUT_VARIABLE's file.
  function(sluice_emulated_source source output_variable)
    get_filename_component(name ${source} NAME_WE)
    set(emulated ${CMAKE_CURRENT_BINARY_DIR}/emulated/${name}.cpp)
    add_custom_command(OUTPUT ${emulated}
      COMMAND ${CMAKE_COMMAND} -DIN=${source} -DOUT=${emulated} -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/emulation/rewrite.cmake
      DEPENDS ${source} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/emulation/rewrite.cmake
      COMMENT "Rewriting ${name}.cu for the CUDA emulation")
    # The kernels get the warnings nvcc gives them, not the project's C++ ones (#pragma unroll is nvcc's).
    set_source_files_properties(${emulated} PROPERTIES COMPILE_OPTIONS
                                "-Wno-conversion;-Wno-pedantic;-Wno-unknown-pragmas;-Wno-float-conversion")
    set(${output_variable} ${emulated} PARENT_SCOPE)
  endfunction()
  set(emulated_kernels)
  foreach(kernel rmsnorm pointwise rope cross_entropy parallel attention attention_mma)
    sluice_emulated_source(${kernel_sources}/${kernel}.cu emulated)
    list(APPEND emulated_kernels ${emulated})
  endforeach()
  set(emulation ${CMAKE_CURRENT_LIST_DIR}/emulation)
  # The emulator, its runtime and the emulated kernels, compiled once for the emulated test programs.
  add_library(sluice_executor_emulation OBJECT ${emulation}/cuda_emulation.cpp ${emulation}/cuda_runtime.cpp
              ${emulated_kernels})
  target_include_directories(sluice_executor_emulation PUBLIC ${emulation} ${kernel_sources})
  target_include_directories(sluice_executor_emulation SYSTEM PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(sluice_executor_emulation PUBLIC sluice_executor_reference)
  # kernels.hpp wants the executor's attention kernel; the kernel tests name each one they run.
  target_compile_definitions(sluice_executor_emulation PUBLIC SLUICE_EXECUTOR_ATTENTION=mma SLUICE_CUDA_EMULATION)
  sluice_target_defaults(sluice_executor_emulation)
  # Optimised in every build, the sanitized one too (whose instrumentation stays): unoptimised, each emulated
  # mma.sync is some hundred calls of one-line helpers, and the test took minutes.
  target_compile_options(sluice_executor_emulation PRIVATE -O1)
  # A test program of the emulation: SOURCES with the emulation's objects.
  function(sluice_add_emulated_test name)
    add_executable(${name} ${ARGN} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gpu_test_main.cpp)
    target_link_libraries(${name} PRIVATE sluice_executor_emulation sluice::io doctest::doctest)
    sluice_target_defaults(${name})
    sluice_test_optimisation(${name})
  endfunction()
  sluice_add_emulated_test(test_executor_kernels_emulated ${CMAKE_CURRENT_LIST_DIR}/test_executor_kernels.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/test_executor_kernels_rows.cpp)
  add_test(NAME test_executor_kernels_emulated COMMAND test_executor_kernels_emulated --test-suite=gpu)

  # The CUDA backend's own sources (and NCCL's transport, with cuBLAS and NCCL emulated too) running
  # test_executor_cuda's GPU cases: every plan the GPU cases run, TP, CP and recompute among them, on the local
  # transport (streams per rank, and serialized) and on NCCL.
  find_path(SLUICE_EMULATION_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(SLUICE_EMULATION_NCCL_INCLUDE_DIR)
    sluice_emulated_source(${backend_sources}/embedding.cu emulated_embedding)
    sluice_add_emulated_test(test_executor_cuda_emulated ${CMAKE_CURRENT_LIST_DIR}/test_executor_cuda.cpp
      ${emulation}/libraries.cpp ${emulated_embedding} ${backend_sources}/backend.cpp
      ${backend_sources}/collectives.cpp ${backend_sources}/local.cpp ${backend_sources}/nccl.cpp
      ${backend_sources}/profiler.cpp ${backend_sources}/stage.cpp)
    target_include_directories(test_executor_cuda_emulated PRIVATE ${backend_sources}
      ${PROJECT_SOURCE_DIR}/reference_executor/include)
    target_include_directories(test_executor_cuda_emulated SYSTEM PRIVATE ${SLUICE_EMULATION_NCCL_INCLUDE_DIR})
    target_link_libraries(test_executor_cuda_emulated PRIVATE sluice_executor_host)
    target_compile_definitions(test_executor_cuda_emulated PRIVATE SLUICE_EXECUTOR_HAVE_NCCL=1)
    # Optimised in the sanitized build too, as the emulation is: the float64 host runs it checks against and the
    # backend's host code took three quarters of its time at -O0.
    target_compile_options(test_executor_cuda_emulated PRIVATE -O1)
    # The profiler's case is left out: it would time the emulation, whose attention grows with the square of the
    # length far faster than a GPU's, so that its fit, extrapolated to the longest sequence the emulated memory
    # holds, passes the profile's bound on latency (and it takes 4 minutes). Under the sanitizers, which make the
    # emulation 4x slower, so is the case of the TP and CP plans on the local transport (6 minutes); the local
    # transport's other plans and the NCCL case's, TP, CP and recompute among them, still run there.
    set(emulated_cases_left_out "*profiler*")
    if(SLUICE_SANITIZE)
      string(APPEND emulated_cases_left_out ",*TP and CP plans on one GPU*")
    endif()
    add_test(NAME test_executor_cuda_emulated COMMAND test_executor_cuda_emulated --test-suite=gpu,gpus:4
             "--test-case-exclude=${emulated_cases_left_out}")
    set_tests_properties(test_executor_cuda_emulated PROPERTIES COST 300)
  endif()
endif()
