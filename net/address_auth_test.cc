// ParseHostPort (net/address.h) and ConstantTimeEquals (net/auth.h).
#include <gtest/gtest.h>

#include <string>

#include "net/address.h"
#include "net/auth.h"

namespace pace::net {
namespace {

TEST(ParseHostPortTest, AcceptsHostsAndPorts) {
  std::string host;
  uint16_t port = 1;
  ASSERT_TRUE(ParseHostPort("127.0.0.1:7100", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 7100);
  ASSERT_TRUE(ParseHostPort("node-3.cluster:0", &host, &port).ok());
  EXPECT_EQ(host, "node-3.cluster");
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(ParseHostPort("[::1]:65535", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 65535);
}

TEST(ParseHostPortTest, RejectsWithClearMessages) {
  struct Case {
    const char* spec;
    const char* expect;
  };
  for (const Case& c : {Case{"127.0.0.1", "missing ':port'"}, Case{":7100", "empty host"},
                        Case{"host:", "empty port"}, Case{"host:7x", "not a number"},
                        Case{"host:-1", "not a number"}, Case{"host:65536", "out of range"},
                        Case{"host:999999", "out of range"}, Case{"::1:80", "brackets"},
                        Case{"[::1:80", "unbalanced"}, Case{"[]:80", "unbalanced"}}) {
    std::string host = "unchanged";
    uint16_t port = 9;
    Status s = ParseHostPort(c.spec, &host, &port);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.spec;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.spec << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.spec), std::string::npos) << "names the input";
    EXPECT_EQ(host, "unchanged");
    EXPECT_EQ(port, 9);
  }
}

TEST(ConstantTimeEqualsTest, ComparesBytes) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_TRUE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0b", 3)));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_FALSE(ConstantTimeEquals("secret", ""));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0", 2), "a"));
}

}  // namespace
}  // namespace pace::net
