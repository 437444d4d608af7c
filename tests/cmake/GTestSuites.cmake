# embedlab_gtest_suites(<target> GROUP <name> LABEL <label> TIMEOUT <seconds per case>
#                       [FILTER <gtest filter>] [SERIAL] [LOCK <resource>])
# Registers one ctest test per GoogleTest suite of <target>, or per batch of its quick
# suites (not one per case): each ctest test starts a process, and a test program's
# start (libtorch's static initialisers) costs about half a second of CPU, so 571 cases
# as 571 processes spent about 5 minutes of CI on starting. A test runs its cases by name
# (--gtest_filter=Suite.a:Suite.b), with TIMEOUT times its case count; it is reported
# skipped only when every case skipped (scripts/skip-reasons.sh prints each reason).
# The cases are listed when the program is linked (POST_BUILD, as
# gtest_discover_tests(... DISCOVERY_MODE POST_BUILD) does: at ctest time the 38
# listings took about 20 s of CPU at the tests phase's start, on one core), and at
# ctest time only when the list is older than the program (a sanitizer tree, which
# does not run them at build time). GROUP names the list's cache file (one per FILTER
# of a target); SERIAL tests run alone (RUN_SERIAL) and are named "<suite> (alone)".
# Suites under tests/cmake/TestCosts.cmake's threshold share ctest tests (GTestSuitesImpl.cmake).
set(EMBEDLAB_GTEST_SUITES_IMPL "${CMAKE_CURRENT_LIST_DIR}/GTestSuitesImpl.cmake")
set(EMBEDLAB_TEST_COSTS "${CMAKE_CURRENT_LIST_DIR}/TestCosts.cmake")

function(embedlab_gtest_suites target)
  cmake_parse_arguments(S "SERIAL" "GROUP;LABEL;TIMEOUT;FILTER;LOCK" "" ${ARGN})
  set(base "${CMAKE_CURRENT_BINARY_DIR}/${target}_${S_GROUP}")
  set(serial 0)
  if(S_SERIAL)
    set(serial 1)
  endif()
  file(GENERATE OUTPUT "${base}_vars.cmake" CONTENT
"set(EMBEDLAB_SUITES_EXE [==[$<TARGET_FILE:${target}>]==])
set(EMBEDLAB_SUITES_LIST [==[${base}_suites.cmake]==])
set(EMBEDLAB_SUITES_FILTER [==[${S_FILTER}]==])
set(EMBEDLAB_SUITES_LABEL [==[${S_LABEL}]==])
set(EMBEDLAB_SUITES_TIMEOUT [==[${S_TIMEOUT}]==])
set(EMBEDLAB_SUITES_SERIAL ${serial})
set(EMBEDLAB_SUITES_LOCK [==[${S_LOCK}]==])
set(EMBEDLAB_SUITES_WORKDIR [==[${CMAKE_CURRENT_BINARY_DIR}]==])
")
  # The list is rewritten when it is older than the program, the lister or the costs.
  file(GENERATE OUTPUT "${base}_include.cmake" CONTENT
"include([==[${base}_vars.cmake]==])
if(NOT EXISTS \"\${EMBEDLAB_SUITES_LIST}\" OR \"\${EMBEDLAB_SUITES_EXE}\" IS_NEWER_THAN \"\${EMBEDLAB_SUITES_LIST}\"
   OR [==[${EMBEDLAB_GTEST_SUITES_IMPL}]==] IS_NEWER_THAN \"\${EMBEDLAB_SUITES_LIST}\"
   OR [==[${EMBEDLAB_TEST_COSTS}]==] IS_NEWER_THAN \"\${EMBEDLAB_SUITES_LIST}\")
  include([==[${EMBEDLAB_GTEST_SUITES_IMPL}]==])
endif()
include(\"\${EMBEDLAB_SUITES_LIST}\")
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${base}_include.cmake")
  # An instrumented program's listing would run under the sanitizers at build time (and
  # a cross-built one cannot run): those list at ctest time.
  if(NOT EMBEDLAB_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
    add_custom_command(TARGET ${target} POST_BUILD
                       COMMAND ${CMAKE_COMMAND} -D "EMBEDLAB_SUITES_VARS=${base}_vars.cmake"
                               -P "${EMBEDLAB_GTEST_SUITES_IMPL}"
                       VERBATIM)
  endif()
endfunction()
