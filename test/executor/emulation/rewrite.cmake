# Turns a kernel source (.cu) into C++ for the CUDA emulation (cuda_emulation.hpp): launches
# `kernel<<<grid, block, shared, stream>>>(args)` become `kernel | Config{grid, block, shared, stream}(args)`, and
# `extern __shared__ [__align__(n)] T name[];` becomes a pointer to the launch's dynamic shared memory. #line keeps the compiler's
# messages on the original file.
#   cmake -DIN=path/to/kernel.cu -DOUT=path/to/kernel.cpp -P rewrite.cmake
file(READ "${IN}" source)
string(REPLACE "<<<" " | ::sluice::executor::emulation::Config{" source "${source}")
string(REPLACE ">>>" "}" source "${source}")
string(REGEX REPLACE "extern __shared__ (__align__\\([0-9]+\\) )?([A-Za-z_0-9: ]+) ([A-Za-z_0-9]+)\\[\\];"
       "\\2* const \\3 = static_cast<\\2*>(::sluice::executor::emulation::dynamic_shared());" source "${source}")
file(WRITE "${OUT}.staged" "#include \"cuda_emulation.hpp\"\n#line 1 \"${IN}\"\n${source}")
file(RENAME "${OUT}.staged" "${OUT}")
