# ccache as the compiler launcher when it is installed (EMBEDLAB_CCACHE=OFF leaves it
# out). Its cache is outside the tree (ccache's own default, ~/.cache/ccache), and
# paths are made relative to the source tree, so a fresh clone in another folder on
# the same machine reuses what an earlier build compiled. The precompiled headers
# need the pch_defines and time_macros sloppiness (ccache's manual, "Precompiled
# headers"); include_file_mtime/ctime: a fresh clone's files are all new.
option(EMBEDLAB_CCACHE "Compile through ccache when it is installed" ON)
# A launcher given on the command line (scripts/check-arm64.sh) is kept.
if(EMBEDLAB_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(EMBEDLAB_CCACHE_PROGRAM ccache)
  if(EMBEDLAB_CCACHE_PROGRAM)
    set(_embedlab_ccache
        ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=20G
        CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
        ${EMBEDLAB_CCACHE_PROGRAM})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${_embedlab_ccache})
    set(CMAKE_C_COMPILER_LAUNCHER ${_embedlab_ccache})
    message(STATUS "Compiling through ccache (${EMBEDLAB_CCACHE_PROGRAM}; `ccache -s` shows its hits)")
  endif()
endif()
