# Builds the probe targets of tests/layers/CMakeLists.txt (each source includes a header of
# a layer its layer may not use) and passes only when every probe failed because its
# header was not found: the layer's include root does not reach that layer.
#   cmake -DBUILD_DIR=... -DTARGETS="t1;t2" -DEXPECTED="probe.cpp=header;..." -DKEEP_GOING=... -P expect_probes_fail.cmake
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGETS} -- ${KEEP_GOING}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(result EQUAL 0)
  message(FATAL_ERROR "every upward include compiled: the layers' include roots do not enforce src/layers.txt\n${out}")
endif()
set(missed "")
list(LENGTH EXPECTED count)
foreach(pair IN LISTS EXPECTED)
  string(REPLACE "=" ";" parts "${pair}")
  list(GET parts 0 probe)
  list(GET parts 1 header)
  string(REPLACE "." "\\." probe_re "${probe}")
  string(REPLACE "." "\\." header_re "${header}")
  # GCC: "fatal error: x/y.hpp: No such file or directory"; Clang: "fatal error: 'x/y.hpp' file not found".
  if(NOT out MATCHES "${probe_re}:[0-9]+:[0-9]+: fatal error: '?${header_re}'?(: No such file| file not found)")
    list(APPEND missed "${probe} (#include \"${header}\")")
  endif()
endforeach()
if(missed)
  list(JOIN missed "\n  " missed_text)
  message(FATAL_ERROR "these upward includes did not fail as 'not found':\n  ${missed_text}\n\nbuild output:\n${out}")
endif()
message(STATUS "all ${count} upward includes fail to compile (header not found)")
