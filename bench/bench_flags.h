// The benches' command lines are CLI11's; these are the integer checks they share, with messages
// that name the value (CLI11's PositiveNumber and NonNegativeNumber print a double's whole range).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

// A whole number no smaller than `low`: "--rounds x" reads "x is not a whole number".
inline CLI::Validator at_least(long low) {
  return CLI::Validator(
      [low](std::string& text) -> std::string {
        long value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return text + " is not a whole number";
        if (value < low) return text + " is less than " + std::to_string(low);
        return "";
      },
      ">=" + std::to_string(low));
}
