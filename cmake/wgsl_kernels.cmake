# The WGSL kernels under src/ops, embedded into one generated source (WGTRAIN_EMBEDDED) by embed_wgsl.cmake.
# Included by the native build (CMakeLists.txt) and the browser build (web/wasm.cmake).
file(GLOB_RECURSE WGTRAIN_WGSL CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/src/ops/*.wgsl")
list(SORT WGTRAIN_WGSL)
string(REPLACE ";" "|" WGTRAIN_WGSL_ARG "${WGTRAIN_WGSL}")
set(WGTRAIN_EMBEDDED "${CMAKE_BINARY_DIR}/generated/embedded_kernels.cpp")
add_custom_command(
  OUTPUT "${WGTRAIN_EMBEDDED}"
  COMMAND ${CMAKE_COMMAND} -DOUTPUT=${WGTRAIN_EMBEDDED} -DROOT=${CMAKE_SOURCE_DIR}/src/ops
          "-DSOURCES=${WGTRAIN_WGSL_ARG}" -P ${CMAKE_SOURCE_DIR}/cmake/embed_wgsl.cmake
  DEPENDS ${WGTRAIN_WGSL} ${CMAKE_SOURCE_DIR}/cmake/embed_wgsl.cmake
  COMMENT "Embedding WGSL kernels"
  VERBATIM)
