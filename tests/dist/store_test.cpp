// The TCP store in one process: clients on threads meet through the server; waits time out with
// the missing keys named; a server that goes away is an error naming rank 0, not a hang.
#include <gtest/gtest.h>

#include <thread>

#include "errors.h"
#include "tandem/dist/tcp_store.h"

namespace tandem::dist {
namespace {

using namespace std::chrono_literals;
using tandem::testing::error_of;
using tandem::testing::expect_contains;

TEST(TcpStore, GetWaitsForAnotherClientsSet) {
  TcpStoreServer server(0);
  TcpStore a("127.0.0.1", server.port(), 5s);
  std::thread writer([&] {
    TcpStore b("127.0.0.1", server.port(), 5s);
    std::this_thread::sleep_for(50ms);
    b.set("k", std::string("v\0w", 3));
    b.set("empty", "");
  });
  EXPECT_EQ(a.get("k", 5s), std::string("v\0w", 3));
  a.wait({"k", "empty"}, 5s);
  EXPECT_EQ(a.get("empty", 1s), "");
  writer.join();
}

TEST(TcpStore, TimeoutsNameTheKeys) {
  TcpStoreServer server(0);
  TcpStore a("127.0.0.1", server.port(), 5s);
  a.set("present", "1");
  expect_contains(error_of([&] { a.get("absent", 100ms); }), "key 'absent' not set within 0.1 s");
  expect_contains(error_of([&] { a.wait({"present", "gone"}, 100ms); }), "'gone'");
}

TEST(TcpStore, ServerGoneIsAnError) {
  auto server = std::make_unique<TcpStoreServer>(0);
  const std::uint16_t port = server->port();
  TcpStore a("127.0.0.1", port, 5s);
  server.reset();
  expect_contains(error_of([&] { a.get("k", 1s); }), "rank 0 exited or died");
  expect_contains(error_of([&] { TcpStore("127.0.0.1", port, 200ms); }),
                  "cannot connect to the rendezvous store");
}

}  // namespace
}  // namespace tandem::dist
