# Runs when the program is linked (cmake -P, EMBEDLAB_SUITES_VARS naming the file of
# the variables below), or at ctest time from the include file embedlab_gtest_suites
# wrote: lists the program's cases and writes EMBEDLAB_SUITES_LIST, one add_test per
# suite that TestCosts.cmake lists at its threshold or above (with that COST), and one
# per batch of the program's other suites ("<program>:SuiteA,SuiteB", about
# EMBEDLAB_BATCH_SECONDS each): one program start for many quick suites.
if(EMBEDLAB_SUITES_VARS)
  include("${EMBEDLAB_SUITES_VARS}")
endif()
include("${CMAKE_CURRENT_LIST_DIR}/TestCosts.cmake")
set(EMBEDLAB_BATCH_SECONDS 12)

# Appends to `out` (in the caller) one test of the cases `cases`, named `name`.
function(embedlab_suites_add_test name cases cost)
  list(LENGTH cases count)
  math(EXPR timeout "${EMBEDLAB_SUITES_TIMEOUT} * ${count}")
  list(JOIN cases ":" filter)
  set(extra "")
  if(EMBEDLAB_SUITES_SERIAL)
    set(name "${name} (alone)")
    string(APPEND extra " RUN_SERIAL TRUE")
  endif()
  if(EMBEDLAB_SUITES_LOCK)
    string(APPEND extra " RESOURCE_LOCK [==[${EMBEDLAB_SUITES_LOCK}]==]")
  endif()
  string(APPEND out
    "add_test([==[${name}]==] [==[${EMBEDLAB_SUITES_EXE}]==] [==[--gtest_filter=${filter}]==])\n"
    "set_tests_properties([==[${name}]==] PROPERTIES LABELS [==[${EMBEDLAB_SUITES_LABEL}]==]"
    " TIMEOUT ${timeout} COST ${cost} WORKING_DIRECTORY [==[${EMBEDLAB_SUITES_WORKDIR}]==]"
    " ENVIRONMENT QT_QPA_PLATFORM=offscreen ENVIRONMENT_MODIFICATION OMP_WAIT_POLICY=set:PASSIVE"
    " SKIP_REGULAR_EXPRESSION [==[\\[  PASSED  \\] 0 tests\\.]==]${extra})\n")
  set(out "${out}" PARENT_SCOPE)
endfunction()

# One test of the batch so far (a lone suite keeps its own name); the batch starts anew.
macro(embedlab_suites_add_batch)
  list(LENGTH batch_suites batch_size)
  if(batch_size EQUAL 1)
    set(batch_name "${batch_suites}")
  else()
    list(JOIN batch_suites "," batch_name)
    set(batch_name "${program}:${batch_name}")
  endif()
  embedlab_suites_add_test("${batch_name}" "${batch_cases}" ${batch_cost})
  set(batch_suites "")
  set(batch_cases "")
  set(batch_cost 0)
endmacro()

# A function: its variables (cases_<suite>) are fresh for each program and group.
function(embedlab_write_suites)
  set(list_args --gtest_list_tests)
  if(EMBEDLAB_SUITES_FILTER)
    list(APPEND list_args "--gtest_filter=${EMBEDLAB_SUITES_FILTER}")
  endif()
  set(ENV{QT_QPA_PLATFORM} offscreen)
  execute_process(COMMAND "${EMBEDLAB_SUITES_EXE}" ${list_args}
                  WORKING_DIRECTORY "${EMBEDLAB_SUITES_WORKDIR}"
                  TIMEOUT 60 OUTPUT_VARIABLE listing RESULT_VARIABLE status ERROR_VARIABLE errors)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "listing the cases of ${EMBEDLAB_SUITES_EXE} failed (${status}): ${errors}")
  endif()

  # --gtest_list_tests: "Suite." (maybe "  # TypeParam = ..."), then "  Case" lines.
  string(REPLACE ";" "\\;" listing "${listing}")
  string(REPLACE "\n" ";" lines "${listing}")
  set(suites "")
  set(suite "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "  +#.*$" "" line "${line}")
    if(line MATCHES "^([^ ].*)\\.$")
      set(suite "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^  +([^ ].*)$" AND suite)
      set(case "${CMAKE_MATCH_1}")
      if(NOT case MATCHES "^DISABLED_" AND NOT suite MATCHES "^DISABLED_")
        if(NOT DEFINED "cases_${suite}")
          list(APPEND suites "${suite}")
          set("cases_${suite}" "")
        endif()
        list(APPEND "cases_${suite}" "${suite}.${case}")
      endif()
    endif()
  endforeach()

  set(out "# Written by tests/cmake/GTestSuitesImpl.cmake from ${EMBEDLAB_SUITES_EXE} --gtest_list_tests\n")
  get_filename_component(program "${EMBEDLAB_SUITES_EXE}" NAME)
  # A batch: its suites' names, cases and cost (a suite TestCosts.cmake does not list: 1 s).
  set(batch_suites "")
  set(batch_cases "")
  set(batch_cost 0)
  foreach(suite IN LISTS suites)
    set(cost "${EMBEDLAB_TEST_COST_${suite}}")
    if(cost AND cost GREATER_EQUAL EMBEDLAB_TEST_OWN_SECONDS)
      embedlab_suites_add_test("${suite}" "${cases_${suite}}" ${cost})
      continue()
    endif()
    if(NOT cost)
      set(cost 1)
    endif()
    if(batch_suites AND batch_cost GREATER_EQUAL EMBEDLAB_BATCH_SECONDS)
      embedlab_suites_add_batch()
    endif()
    list(APPEND batch_suites "${suite}")
    list(APPEND batch_cases ${cases_${suite}})
    math(EXPR batch_cost "${batch_cost} + ${cost}")
  endforeach()
  if(batch_suites)
    embedlab_suites_add_batch()
  endif()
  file(WRITE "${EMBEDLAB_SUITES_LIST}" "${out}")
endfunction()
embedlab_write_suites()
