// Sanitizer builds only (WGTRAIN_SANITIZE: CMakeLists.txt links this into wgtrain_tests and the CLI, which the
// tests run, and exports it from them): dlclose does nothing, so every library stays mapped until the process ends.
//
// Why: Dawn and Mesa unload libraries they opened (drivers, EGL, the Vulkan loader's ICDs) as they shut down.
// LeakSanitizer runs at exit, after that: it can no longer scan those libraries' globals, and memory still held
// through them is reported as leaked from "<unknown module>", which no suppression can name. With the libraries
// kept, those reports go away (they are not leaks), and leak detection stays on for wgtrain's own code.
extern "C" int dlclose(void*) { return 0; }
