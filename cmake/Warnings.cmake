# Warnings for our own targets only; third-party headers are SYSTEM includes.
function(embedlab_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
endfunction()
