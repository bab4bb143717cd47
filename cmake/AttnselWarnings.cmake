# Warnings are errors on our own targets.
function(attnsel_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wpedantic -Wno-error=deprecated-declarations>)
endfunction()
