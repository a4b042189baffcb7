// metrics.jsonl -> RunData (run, step and epoch lines, a resume, a line cut by a crash), the share
// table and the slowest device, and the page built from them.
#include <gtest/gtest.h>

#include <string>

#include "errors.h"
#include "tandem/report/html.h"
#include "tandem/report/run_data.h"
#include "tandem/report/share.h"

namespace tandem::report {
namespace {

std::string step_line(int step, double loss, double cpu1_forward) {
  return R"({"kind":"step","step":)" + std::to_string(step) + R"(,"epoch":1,"loss":)" +
         std::to_string(loss) +
         R"(,"lr":0.1,"images_per_s":100.0,"devices":[{"device":"cpu:0","samples":10,"seconds":0.05,)"
         R"("forward_s":0.02,"backward_s":0.03,"reduction_s":0.001,"optimizer_s":0.004,"wait_s":0.01},)"
         R"({"device":"cpu:1","samples":6,"seconds":0.05,"forward_s":)" +
         std::to_string(cpu1_forward) +
         R"(,"backward_s":0.03,"reduction_s":0.002,"optimizer_s":0.0,"wait_s":0.0}],"seconds":0.16,)"
         R"("data_s":0.02,"accuracy":0.5,"time":)" + std::to_string(1000 + step) + "}\n";
}

const std::string kRunLine =
    R"({"kind":"run","step":0,"time":1000.0,"model":"mlp","parameters":1234567,"data":"synthetic:1x8x8:4:96",)"
    R"("input":"1x8x8","classes":3,"train_samples":96,"test_samples":48,"layout":"cpu:0,cpu:1",)"
    R"("device_count":2,"batch_size":16,"epochs":1,"steps_per_epoch":3,"total_steps":3,)"
    R"("optimizer":"sgd","lr":0.1,"schedule":"none"})" "\n";

const std::string kEpochLine =
    R"({"kind":"epoch","step":3,"epoch":1,"complete":true,"loss":0.61234,"lr":0.1,"images_per_s":90.0,)"
    R"("seconds":0.5,"test_loss":0.7,"test_accuracy":0.8125,"devices":[],"train_accuracy":0.55,)"
    R"("data_s":0.06,"confusion":[[5,1,0],[0,4,2],[1,0,3]],"time":1004.0})" "\n";

TEST(RunData, ParsesRunStepAndEpochLines) {
  const RunData run = parse_metrics(kRunLine + step_line(1, 1.5, 0.04) + step_line(2, 1.0, 0.04) +
                                    step_line(3, 0.5, 0.04) + kEpochLine);
  ASSERT_EQ(run.starts.size(), 1u);
  EXPECT_EQ(run.starts[0].parameters, 1234567);
  EXPECT_EQ(run.starts[0].layout, "cpu:0,cpu:1");
  ASSERT_EQ(run.steps.size(), 3u);
  EXPECT_EQ(run.steps[2].step, 3);
  EXPECT_EQ(run.steps[2].samples, 16);
  EXPECT_DOUBLE_EQ(*run.steps[0].accuracy, 0.5);
  ASSERT_EQ(run.epochs.size(), 1u);
  EXPECT_DOUBLE_EQ(*run.epochs[0].train_accuracy, 0.55);
  EXPECT_EQ(run.last_evaluated(), &run.epochs[0]);
  EXPECT_EQ(run.confusion, (std::vector<std::vector<std::int64_t>>{{5, 1, 0}, {0, 4, 2}, {1, 0, 3}}));
  EXPECT_EQ(run.confusion_epoch, 1);
  ASSERT_EQ(run.devices.size(), 2u);
  EXPECT_EQ(run.devices[0].name, "cpu:0");
  EXPECT_EQ(run.devices[0].samples, 30);
  EXPECT_NEAR(run.devices[1].forward_s, 0.12, 1e-12);
  EXPECT_NEAR(run.devices[1].data_s, 0.06, 1e-12);  // each device waits for every batch
  EXPECT_NEAR(run.devices[0].busy_s(), 3 * 0.055, 1e-12);
  EXPECT_NEAR(run.training_seconds(), 0.48, 1e-12);
  EXPECT_EQ(run.samples(), 48);
  EXPECT_DOUBLE_EQ(run.wall_seconds, 4.0);  // 1000 -> 1004
  EXPECT_EQ(run.skipped_lines, 0u);
}

TEST(RunData, ResumesAddSessionsAndACutLineIsSkipped) {
  const std::string resumed =
      R"({"kind":"run","step":2,"time":2000.0,"model":"mlp","total_steps":3,"ranks":2})" "\n";
  const RunData run = parse_metrics(kRunLine + step_line(1, 1.5, 0.04) + step_line(2, 1.0, 0.04) +
                                    resumed + R"({"kind":"step","step":3,"epoch":1,"time":2003.0})" "\n" +
                                    R"({"kind":"step","step":3,"lo)" + "\n" +
                                    R"({"kind":"step","step":"four"})" "\n");
  EXPECT_EQ(run.starts.size(), 2u);
  EXPECT_EQ(run.steps.size(), 3u);
  EXPECT_EQ(run.skipped_lines, 2u);  // cut short, and a step that is not a number
  EXPECT_EQ(run.first_skipped, 6u);
  EXPECT_DOUBLE_EQ(run.wall_seconds, 2.0 + 3.0);  // 1000 -> 1002, then 2000 -> 2003
  EXPECT_EQ(run.latest_start()->step, 2);
  EXPECT_EQ(run.latest_start()->ranks, 2);
  EXPECT_EQ(run.starts[0].ranks, 1);  // absent: one process
  EXPECT_NE(render_html(run, "r").find("in each of 2 processes"), std::string::npos);
  EXPECT_EQ(run.last_evaluated(), nullptr);
}

TEST(RunData, ReadingAMissingFileNamesIt) {
  testing::expect_contains(testing::error_of([] { read_metrics("/nonexistent/run/metrics.jsonl"); }),
                           "report: cannot read '/nonexistent/run/metrics.jsonl'");
}

TEST(Share, TableRowsAndTheSlowestDevice) {
  const RunData run = parse_metrics(step_line(1, 1.5, 0.09) + step_line(2, 1.0, 0.09));
  const ShareTable table = share_table(run.devices);
  ASSERT_EQ(table.rows.size(), 3u);  // two devices and the total
  EXPECT_EQ(table.rows[0][0], "cpu:0");
  EXPECT_EQ(table.rows[0][1], "20");
  EXPECT_EQ(table.rows[0][2], "62.5%");
  EXPECT_EQ(table.rows[1][2], "37.5%");
  EXPECT_EQ(table.rows[2][0], "total");
  EXPECT_EQ(table.rows[2][1], "32");
  EXPECT_EQ(table.rows[2][2], "100.0%");
  // cpu:1 was busy 2 * (0.09 + 0.03 + 0.002) = 0.244 s, cpu:0 2 * 0.055 = 0.110 s.
  EXPECT_EQ(slowest_device(run.devices), 1u);
  EXPECT_EQ(table.rows[1][3], "0.244");
  EXPECT_FALSE(slowest_device({}).has_value());
  const std::vector<std::string> lines = share_table_lines(table);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(lines[0].starts_with("device  samples  samples %")) << lines[0];
  for (const std::string& line : lines) EXPECT_EQ(line.size(), lines[0].size()) << line;
  EXPECT_EQ(format_count(1234567), "1,234,567");
  EXPECT_EQ(format_count(-1000), "-1,000");
  EXPECT_EQ(format_count(999), "999");
}

TEST(Page, FullRunEmptyRunAndOddNames) {
  const std::string page = render_html(
      parse_metrics(kRunLine + step_line(1, 1.5, 0.04) + step_line(2, 1.0, 0.04) +
                    step_line(3, 0.5, 0.04) + kEpochLine),
      "run <1>");
  EXPECT_TRUE(page.starts_with("<!DOCTYPE html>"));
  EXPECT_NE(page.find("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"),
            std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"));  // no other URL
  EXPECT_NE(page.find("run &lt;1&gt;"), std::string::npos);
  for (const char* figure : {"1,234,567", "0.6123", "81.25%", "55.00%", "Finished: 3 steps",
                             "Slowest device: <strong>cpu:1</strong>", "Confusion matrix of the last evaluation (epoch 1)"}) {
    EXPECT_NE(page.find(figure), std::string::npos) << figure;
  }
  const std::string empty = render_html(parse_metrics(""), "empty");
  EXPECT_TRUE(empty.ends_with("</html>\n"));
  EXPECT_NE(empty.find("no run line"), std::string::npos);
  EXPECT_NE(empty.find("No evaluation yet"), std::string::npos);
  const std::string odd = render_html(
      parse_metrics(R"({"kind":"step","step":1,"devices":[{"device":"<b>gpu&0</b>","samples":4,"rank":3}]})"),
      "odd");
  EXPECT_NE(odd.find("rank 3 &lt;b&gt;gpu&amp;0&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(odd.find("<b>gpu"), std::string::npos);
  EXPECT_NE(odd.find("no run line"), std::string::npos);
}

TEST(Page, GpuReadingsAreParsedAndDrawnBesideTheShares) {
  const std::string gpu_lines =
      R"({"kind":"gpu","step":1,"device":"cuda:0","gpu_percent":90,"memory_percent":40,)"
      R"("memory_used":2147483648,"memory_total":8589934592,"power_w":300.5,"time":1001.0})" "\n"
      R"({"kind":"gpu","step":2,"device":"cuda:0","gpu_percent":70,"memory_percent":30,)"
      R"("memory_used":3221225472,"memory_total":8589934592,"time":1001.5})" "\n";
  const RunData run = parse_metrics(kRunLine + step_line(1, 1.5, 0.04) + gpu_lines);
  ASSERT_EQ(run.gpu.size(), 2u);
  EXPECT_EQ(run.gpu[0].step, 1);
  EXPECT_EQ(run.gpu[0].device, "cuda:0");
  EXPECT_DOUBLE_EQ(run.gpu[0].gpu_percent, 90);
  EXPECT_DOUBLE_EQ(*run.gpu[0].power_w, 300.5);
  EXPECT_FALSE(run.gpu[1].power_w.has_value());
  EXPECT_EQ(run.skipped_lines, 0u);
  const std::string page = render_html(run, "gpu");
  EXPECT_NE(page.find("GPU usage (NVML readings)"), std::string::npos);
  EXPECT_NE(page.find("cuda:0 kernels busy"), std::string::npos);
  EXPECT_NE(page.find("GPU memory at peak (NVML, every process): cuda:0 3.0 of 8.0 GiB"),
            std::string::npos);
  // A run without readings has no such figure.
  EXPECT_EQ(render_html(parse_metrics(kRunLine + step_line(1, 1.5, 0.04)), "cpu").find("GPU usage"),
            std::string::npos);
}

TEST(Page, SmoothingAndDurations) {
  const std::vector<double> s = smooth({1, 1, 1}, 0.8);
  for (const double v : s) EXPECT_NEAR(v, 1.0, 1e-12);  // debiased: a constant stays put
  EXPECT_DOUBLE_EQ(smooth({4}, 0.9)[0], 4.0);
  EXPECT_EQ(format_seconds(42.04), "42.0 s");
  EXPECT_EQ(format_seconds(185), "3 min 05 s");
  EXPECT_EQ(format_seconds(7620), "2 h 07 min");
}

}  // namespace
}  // namespace tandem::report
