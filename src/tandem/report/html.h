// The report page: one self-contained HTML document (inline CSS and SVG, no script, no network)
// built from RunData, readable from a phone's width up. Not the file writing (report_file.h).
#pragma once

#include <string>
#include <vector>

#include "tandem/report/run_data.h"

namespace tandem::report {

// `name` titles the page (the run directory's name).
std::string render_html(const RunData& run, const std::string& name);

// Debiased exponential moving average (TensorBoard's smoothing) with weight `weight` in [0, 1).
std::vector<double> smooth(const std::vector<double>& values, double weight);

// "42.0 s", "3 min 05 s", "2 h 07 min".
std::string format_seconds(double seconds);

}  // namespace tandem::report
