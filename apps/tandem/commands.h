// The subcommands of `tandem`: each registers its flags on a CLI11 subcommand and returns the
// function that runs it (the process exit status). main.cpp turns errors into one line and exit 2.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace tandem::app {

using Command = std::function<int()>;

Command add_devices_command(CLI::App& app);
Command add_train_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_launch_command(CLI::App& app);
Command add_report_command(CLI::App& app);

}  // namespace tandem::app
