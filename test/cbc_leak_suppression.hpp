#pragma once
// Included by one file of each test program that runs CBC. CBC's deterministic parallel search (threads > 1) leaks
// a branching object per solve inside libCbc; LeakSanitizer is told to ignore it.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __lsan_default_suppressions() { return "leak:libCbc.so\n"; }
#endif
