# Warnings are errors on our own targets.
function(attnsel_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wpedantic -Wno-error=deprecated-declarations>)
  # GCC 12's -Wmaybe-uninitialized misfires inside libstdc++ (std::regex, std::function)
  # when sanitizers instrument the code; the plain build keeps the warning as an error.
  if(ATTNSEL_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
  endif()
endfunction()
