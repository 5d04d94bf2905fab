// CANDLE_ASAN: 1 where this translation unit is compiled with AddressSanitizer. GCC defines
// __SANITIZE_ADDRESS__; clang before 16 answers only __has_feature(address_sanitizer).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define CANDLE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CANDLE_ASAN 1
#endif
#endif
#ifndef CANDLE_ASAN
#define CANDLE_ASAN 0
#endif
