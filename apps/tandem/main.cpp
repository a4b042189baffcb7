// `tandem`: train, evaluate and inspect devices from the command line. Any tandem::Error or bad
// flag ends the program with one line on stderr and exit status 2.
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "tandem/base/check.h"

int main(int argc, char** argv) {
  CLI::App app("tandem: data-parallel neural-network training in C++ (PyTorch's workflow, no Python)",
               "tandem");
  app.require_subcommand(1);
  app.set_version_flag("--version", "tandem 0.1.0");
  const tandem::app::Command devices = tandem::app::add_devices_command(app);
  const tandem::app::Command train = tandem::app::add_train_command(app);
  const tandem::app::Command eval = tandem::app::add_eval_command(app);
  const tandem::app::Command launch = tandem::app::add_launch_command(app);
  const tandem::app::Command report = tandem::app::add_report_command(app);
  if (argc > 1 && argv[1][0] != '-') {
    const std::string command = argv[1];
    if (command != "devices" && command != "train" && command != "eval" && command != "launch" &&
        command != "report") {
      std::fprintf(stderr, "tandem: error: unknown command '%s' (expected devices, train, eval, "
                   "launch or report; see tandem --help)\n", command.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string name = "tandem";
    for (const CLI::App* sub : app.get_subcommands()) name += " " + sub->get_name();
    std::fprintf(stderr, "%s: error: %s (see %s --help)\n", name.c_str(), e.what(), name.c_str());
    return 2;
  }
  const CLI::App* chosen = app.get_subcommands().front();
  const std::string name = "tandem " + chosen->get_name();
  try {
    if (chosen->get_name() == "devices") return devices();
    if (chosen->get_name() == "train") return train();
    if (chosen->get_name() == "launch") return launch();
    if (chosen->get_name() == "report") return report();
    return eval();
  } catch (const tandem::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: internal error: %s\n", name.c_str(), e.what());
    return 1;
  }
}
