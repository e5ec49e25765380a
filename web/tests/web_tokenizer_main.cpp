// main() of the tokenizer tests in the browser (tests/tokenizer_test.cpp, tests/tokenizer_train_test.cpp): no GPU,
// the tokenizer files in Emscripten's virtual file system (preloaded: web/wasm.cmake), and the last line the page
// watches for, as web_test_main.cpp.
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  std::printf("WGTRAIN_EXIT %d\n", rc);
  std::fflush(stdout);
  return rc;
}
