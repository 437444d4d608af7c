# EMBEDLAB_SANITIZE="address;undefined" instruments every target in this build tree.
if(EMBEDLAB_SANITIZE)
  string(REPLACE ";" "," _embedlab_san "${EMBEDLAB_SANITIZE}")
  add_compile_options(-fsanitize=${_embedlab_san} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=${_embedlab_san})
endif()
