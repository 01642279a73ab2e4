# Warnings and sanitizers for sluice's own targets (never imposed on consumers).
include_guard(GLOBAL)
option(SLUICE_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(SLUICE_WERROR "Treat warnings as errors" OFF)

function(sluice_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>)
  if(SLUICE_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
  if(SLUICE_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer>)
    # Line tables are all a sanitizer's stack trace needs; full debug info costs a fifth of the build's time.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-g1>)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
