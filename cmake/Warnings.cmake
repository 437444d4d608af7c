# Warnings for our own targets only; third-party headers are SYSTEM includes.
# C++20 designated initializers leave the other members at their defaults on
# purpose, so -Wmissing-field-initializers is noise here.
function(embedlab_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter
                                           -Wno-missing-field-initializers)
endfunction()
