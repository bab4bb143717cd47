# ATTNSEL_SANITIZE="address;undefined" or "thread" instruments every target.
if(ATTNSEL_SANITIZE)
  list(JOIN ATTNSEL_SANITIZE "," _attnsel_san)
  add_compile_options(-fsanitize=${_attnsel_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_attnsel_san})
  # Highway compiles the CPU kernels once per SIMD target, which instrumented was most of a
  # sanitizer build: these builds compile this machine's own target only (the release
  # build's tests run every target).
  add_compile_options(-march=native)
  add_compile_definitions(HWY_COMPILE_ONLY_STATIC=1)
endif()
