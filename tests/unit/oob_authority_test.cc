// SPDX-License-Identifier: Apache-2.0
// Which report an out-of-band stream reads, by its :authority, as a table:
// "dependency.<name>" (with or without a port) a dependency's, before any
// endpoint rule; an endpoint's port, then its name; any other the node's or
// NOT_FOUND.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "headroom/orca/names.h"
#include "publishers/oob_publisher.h"

namespace headroom::publishers {
namespace {

OobOptions options(bool unknown_is_error) {
  OobOptions o;
  o.oob.unknown_authority_error = unknown_is_error;
  o.endpoints = {{"api", 8080, orca::endpoint_scope("api")},
                 {"dependency.x", 9090, orca::endpoint_scope("dependency.x")}};
  o.dependencies = {{"cache", orca::dependency_scope("cache")}, {"db", orca::dependency_scope("db")}};
  return o;
}

struct AuthorityCase {
  const char* authority;
  const char* scope;  // "": NOT_FOUND with unknown_authority = "error"
};

TEST(OobAuthority, PicksTheReport) {
  const AuthorityCase cases[] = {
      {"dependency.cache", "dependency.cache"},
      {"dependency.cache:8080", "dependency.cache"},  // before the endpoint of port 8080
      {"dependency.db:443", "dependency.db"},
      {"api:8080", "endpoint.api"},
      {"10.0.0.5:8080", "endpoint.api"},
      {"api", "endpoint.api"},
      {"cache", ""},                   // a dependency is named only with its prefix
      {"dependency.nope", ""},         // no such dependency
      {"dependency.x:9090", "endpoint.dependency.x"},  // an endpoint of that name, by its port
      {"endpoint.api", ""},
      {"10.0.0.5:1", ""},
  };
  for (bool error : {false, true}) {
    const auto resolve = authority_resolver(options(error));
    for (const auto& c : cases) {
      const auto got = resolve(c.authority);
      const std::string want = *c.scope != '\0' ? c.scope : (error ? "" : std::string(orca::kNodeScope));
      if (want.empty()) {
        ASSERT_TRUE(std::holds_alternative<grpc::Status>(got)) << c.authority;
        EXPECT_EQ(std::get<grpc::Status>(got).error_code(), grpc::StatusCode::NOT_FOUND) << c.authority;
        EXPECT_THAT(std::get<grpc::Status>(got).error_message(), ::testing::HasSubstr("dependency.<name>"));
      } else {
        ASSERT_TRUE(std::holds_alternative<std::string>(got)) << c.authority;
        EXPECT_EQ(std::get<std::string>(got), want) << c.authority << (error ? " (error)" : " (node)");
      }
    }
  }
}

}  // namespace
}  // namespace headroom::publishers
