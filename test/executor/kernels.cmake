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
  set(emulated_kernels)
  foreach(kernel rmsnorm pointwise rope cross_entropy parallel attention attention_mma)
    set(emulated ${CMAKE_CURRENT_BINARY_DIR}/emulated/${kernel}.cpp)
    add_custom_command(OUTPUT ${emulated}
      COMMAND ${CMAKE_COMMAND} -DIN=${kernel_sources}/${kernel}.cu -DOUT=${emulated}
              -P ${CMAKE_CURRENT_LIST_DIR}/emulation/rewrite.cmake
      DEPENDS ${kernel_sources}/${kernel}.cu ${CMAKE_CURRENT_LIST_DIR}/emulation/rewrite.cmake
      COMMENT "Rewriting ${kernel}.cu for the CUDA emulation")
    list(APPEND emulated_kernels ${emulated})
  endforeach()
  add_executable(test_executor_kernels_emulated ${CMAKE_CURRENT_LIST_DIR}/test_executor_kernels.cpp
                 ${CMAKE_CURRENT_LIST_DIR}/test_executor_kernels_rows.cpp
                 ${CMAKE_CURRENT_LIST_DIR}/emulation/cuda_emulation.cpp ${CMAKE_CURRENT_LIST_DIR}/gpu_test_main.cpp
                 ${emulated_kernels})
  target_include_directories(test_executor_kernels_emulated PRIVATE ${CMAKE_CURRENT_LIST_DIR}/emulation
                             ${kernel_sources} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_executor_kernels_emulated PRIVATE sluice_executor_reference sluice::io doctest::doctest)
  # kernels.hpp wants the executor's default attention kernel; the tests name each one they run.
  target_compile_definitions(test_executor_kernels_emulated PRIVATE SLUICE_EXECUTOR_ATTENTION=mma
                             SLUICE_CUDA_EMULATION)
  sluice_target_defaults(test_executor_kernels_emulated)
  sluice_test_optimisation(test_executor_kernels_emulated)
  # The kernels get the warnings nvcc gives them, not the project's C++ ones (#pragma unroll is nvcc's).
  set_source_files_properties(${emulated_kernels} PROPERTIES COMPILE_OPTIONS
                              "-Wno-conversion;-Wno-pedantic;-Wno-unknown-pragmas;-Wno-float-conversion")
  # The emulated kernels and the emulator optimised in every build, the sanitized one too (whose instrumentation
  # stays): unoptimised, each emulated mma.sync is some hundred calls of one-line helpers, and the test took minutes.
  set_property(SOURCE ${emulated_kernels} ${CMAKE_CURRENT_LIST_DIR}/emulation/cuda_emulation.cpp APPEND
               PROPERTY COMPILE_OPTIONS "-O1")
  add_test(NAME test_executor_kernels_emulated COMMAND test_executor_kernels_emulated --test-suite=gpu)
endif()
