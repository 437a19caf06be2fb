# Runs a bench binary with a bad argument (ctest: bench_bad_args_<name>, tests/CMakeLists.txt): it must end in exit 2
# with one line on stderr naming the binary, never an uncaught exception or a crash
# (bench/bench_args.hpp). Usage: cmake -DBIN=<binary> -DNAME=<name> -DARG=<argument> -P bench_bad_args.cmake
execute_process(COMMAND ${BIN} ${ARG} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
string(STRIP "${err}" err)
string(FIND "${err}" "\n" newline)
if(NOT rc STREQUAL "2" OR NOT err MATCHES "^${NAME}: " OR NOT newline EQUAL -1)
  message(FATAL_ERROR "${NAME} ${ARG}: expected exit 2 and one line starting '${NAME}: ', got exit '${rc}' and:\n${err}")
endif()
