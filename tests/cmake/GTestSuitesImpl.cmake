# Runs at ctest time (from the include file embedlab_gtest_suites wrote): lists the
# program's cases and writes EMBEDLAB_SUITES_LIST, one add_test per suite.
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
  foreach(suite IN LISTS suites)
    set(cases "${cases_${suite}}")
    list(LENGTH cases count)
    math(EXPR timeout "${EMBEDLAB_SUITES_TIMEOUT} * ${count}")
    list(JOIN cases ":" filter)
    set(name "${suite}")
    set(extra "")
    if(EMBEDLAB_SUITES_SERIAL)
      set(name "${suite} (alone)")
      string(APPEND extra " RUN_SERIAL TRUE")
    endif()
    if(EMBEDLAB_SUITES_LOCK)
      string(APPEND extra " RESOURCE_LOCK [==[${EMBEDLAB_SUITES_LOCK}]==]")
    endif()
    string(APPEND out
      "add_test([==[${name}]==] [==[${EMBEDLAB_SUITES_EXE}]==] [==[--gtest_filter=${filter}]==])\n"
      "set_tests_properties([==[${name}]==] PROPERTIES LABELS [==[${EMBEDLAB_SUITES_LABEL}]==]"
      " TIMEOUT ${timeout} WORKING_DIRECTORY [==[${EMBEDLAB_SUITES_WORKDIR}]==]"
      " ENVIRONMENT QT_QPA_PLATFORM=offscreen ENVIRONMENT_MODIFICATION OMP_WAIT_POLICY=set:PASSIVE"
      " SKIP_REGULAR_EXPRESSION [==[\\[  PASSED  \\] 0 tests\\.]==]${extra})\n")
  endforeach()
  file(WRITE "${EMBEDLAB_SUITES_LIST}" "${out}")
endfunction()
embedlab_write_suites()
