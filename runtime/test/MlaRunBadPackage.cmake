# Runs mla-run on a package that is not one and checks that it fails with
# exit code 1, exactly one "mla-run: error:" line on stderr, and no output.
# Inputs: MLA_RUN (the tool), WORK_DIR (a scratch directory).
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/inputs" "${WORK_DIR}/outputs")
file(WRITE "${WORK_DIR}/bad.mlapkg" "MLAPKG but not really a package")

execute_process(
  COMMAND "${MLA_RUN}" "${WORK_DIR}/bad.mlapkg"
          --inputs "${WORK_DIR}/inputs" --outputs "${WORK_DIR}/outputs"
          --scale 0.1
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)

if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit code 1, got '${rc}'")
endif()
if(NOT err MATCHES "^mla-run: error: [^\n]+\n$")
  message(FATAL_ERROR "expected one 'mla-run: error:' line, got:\n${err}")
endif()
if(NOT out STREQUAL "")
  message(FATAL_ERROR "expected no standard output, got:\n${out}")
endif()
file(GLOB written "${WORK_DIR}/outputs/*")
if(written)
  message(FATAL_ERROR "mla-run wrote output files: ${written}")
endif()
message(STATUS "mla-run rejected the bad package: ${err}")
