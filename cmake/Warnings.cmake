# Warnings for our own targets only; third-party headers are SYSTEM includes.
# C++20 designated initializers leave the other members at their defaults on
# purpose, so -Wmissing-field-initializers is noise here.
function(embedlab_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter
                                           -Wno-missing-field-initializers)
endfunction()

# libtorch's headers cost ~30 s a file; every torch-using target reuses the
# engine's precompiled header instead of parsing them again. GCC accepts a PCH
# only with the same -fpic/-fpie setting, so the consumer compiles as PIC like
# the engine (valid in a PIE executable); -Winvalid-pch says when it is refused.
function(embedlab_reuse_engine_pch target)
  target_precompile_headers(${target} REUSE_FROM embedlab_engine)
  target_compile_options(${target} PRIVATE -fPIC -Winvalid-pch)
endfunction()

# Test programs and the CLI are glue around the engine, whose numerics keep the
# build type's -O3: at -O1 they compile about a third faster (most of a test file's
# time is optimisation), with the same results (no fast-math at any level). The
# engine's precompiled header still applies (GCC checks __OPTIMIZE__, set at -O1 too).
function(embedlab_glue_optimisation target)
  target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-O1>)
endfunction()
