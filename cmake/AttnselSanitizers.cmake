# ATTNSEL_SANITIZE="address;undefined" or "thread" instruments every target.
if(ATTNSEL_SANITIZE)
  list(JOIN ATTNSEL_SANITIZE "," _attnsel_san)
  add_compile_options(-fsanitize=${_attnsel_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_attnsel_san})
endif()
