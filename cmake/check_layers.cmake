# The layering rules the build cannot express, checked as a test (ctest -R Layers):
#   - the library holds no CPU reference: nothing of namespace wgtrain::ref is defined in it (the references are
#     the wgtrain_reference library, for the tests);
#   - the data layer (src/data) does not reach up into the model: it includes no model, autograd, GPU or training header.
# cmake -DNM=... -DLIBRARY=libwgtrain.a -DSOURCE_DIR=... -P check_layers.cmake
execute_process(COMMAND "${NM}" -C --defined-only "${LIBRARY}" OUTPUT_VARIABLE symbols ERROR_VARIABLE err
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIBRARY}: ${err}")
endif()
string(REGEX MATCHALL "[^\n]*wgtrain::ref::[^\n]*" ref_symbols "${symbols}")
if(ref_symbols)
  list(LENGTH ref_symbols n)
  list(SUBLIST ref_symbols 0 5 first)
  string(REPLACE ";" "\n  " first "${first}")
  message(FATAL_ERROR "${LIBRARY} defines ${n} symbols of the CPU references (wgtrain::ref), e.g.\n  ${first}\n"
                      "*_ref.cpp files belong to the wgtrain_reference library")
endif()
file(GLOB data_sources "${SOURCE_DIR}/src/data/*.cpp" "${SOURCE_DIR}/src/data/*.h")
set(bad "")
foreach(f IN LISTS data_sources)
  file(STRINGS "${f}" includes REGEX "^#include \"(wgtrain/(llama|autograd|device|tensor|ops|trainer|lora|hf)\\.h|model/|gpu/|ops/|train/)")
  foreach(line IN LISTS includes)
    string(APPEND bad "\n  ${f}: ${line}")
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "the data layer includes headers of the layers above it:${bad}")
endif()
message(STATUS "layers: no wgtrain::ref symbol in ${LIBRARY}; src/data includes nothing above it")
