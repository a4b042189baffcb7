// The benches' command lines: "--flag value" pairs, read into a list. A flag left without its
// value stops the program with a message (exit status 2), as each bench does for an unknown flag.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

inline std::vector<std::pair<std::string, std::string>> flag_pairs(const char* program, int argc,
                                                                   char** argv) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {
      std::fprintf(stderr, "%s: flag %s has no value\n", program, argv[i]);
      std::exit(2);
    }
    pairs.emplace_back(argv[i], argv[i + 1]);
  }
  return pairs;
}
