#include "s3/sessions.h"

#include "hots3/aws/checksum.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hots3::s3 {
namespace {

// A session's request as a client signs it: the string to sign is the test's own, the signature
// is made with the session's secret as any SigV4 signer makes it.
struct Signed {
  aws::SigningScope scope{"20261205", "us-east-1", "s3express"};
  std::string to_sign = "AWS4-HMAC-SHA256\n20261205T101500Z\nscope\nhash";
  std::string signature;
  Signed(const SessionCredentials& c) {
    signature = aws::sign(aws::signing_key(c.secret_key, scope), to_sign);
  }
};

class SessionsTest : public ::testing::Test {
 protected:
  SessionsTest() {
    alice_.name = "alice";
    alice_.access_key = "ALICEACCESSKEY000001";
    alice_.secret_key = "alice-secret";
    bob_.name = "bob";
    bob_.access_key = "BOBACCESSKEY00000001";
    bob_.secret_key = "bob-secret";
  }
  Sessions make(std::string key = std::string(32, 'k')) {
    return Sessions(key, [this](std::string_view name) -> const config::UserConfig* {
      if (name == alice_.name) return &alice_;
      if (name == bob_.name) return &bob_;
      return nullptr;
    });
  }
  static Code code_of(const std::variant<Sessions::Verified, Error>& v) {
    return std::holds_alternative<Error>(v) ? std::get<Error>(v).code : Code::kInternalError;
  }
  std::variant<Sessions::Verified, Error> verify(Sessions& s, const SessionCredentials& c,
                                                 std::string_view bucket = "b--z1--x-s3") {
    const Signed sig(c);
    return s.verify(c.access_key, c.token, bucket, sig.scope, sig.to_sign, sig.signature);
  }
  config::UserConfig alice_, bob_;
};

TEST_F(SessionsTest, ACreatedSessionVerifiesAsItsUserModeAndBucket) {
  Sessions s = make();
  const SessionCredentials c = s.create(alice_, "b--z1--x-s3", SessionMode::kReadOnly);
  EXPECT_TRUE(c.access_key.starts_with("H3S"));
  EXPECT_EQ(c.access_key.size(), 20U);
  EXPECT_EQ(c.secret_key.size(), 40U);
  EXPECT_NEAR(static_cast<double>(c.expires_ms - s.now_ms()), 300000.0, 1000.0);
  for (int i = 0; i < 2; ++i) {  // the first opens the token, the second finds it kept
    auto v = verify(s, c);
    ASSERT_TRUE(std::holds_alternative<Sessions::Verified>(v)) << i;
    EXPECT_EQ(std::get<Sessions::Verified>(v).user, &alice_);
    EXPECT_EQ(std::get<Sessions::Verified>(v).mode, SessionMode::kReadOnly);
  }
  // Two sessions of one user and bucket are different credentials.
  const SessionCredentials other = s.create(alice_, "b--z1--x-s3", SessionMode::kReadOnly);
  EXPECT_NE(other.access_key, c.access_key);
  EXPECT_NE(other.token, c.token);
}

TEST_F(SessionsTest, AnotherBucketOrAWrongSignatureIsRefused) {
  Sessions s = make();
  const SessionCredentials c = s.create(alice_, "b--z1--x-s3", SessionMode::kReadWrite);
  EXPECT_EQ(code_of(verify(s, c, "other--z1--x-s3")), Code::kAccessDenied);
  EXPECT_EQ(code_of(verify(s, c, "")), Code::kAccessDenied);  // service-level requests
  const Signed sig(c);
  EXPECT_EQ(code_of(s.verify(c.access_key, c.token, "b--z1--x-s3", sig.scope, sig.to_sign + "x",
                             sig.signature)),
            Code::kSignatureDoesNotMatch);
  // Still so once the session is kept.
  ASSERT_TRUE(std::holds_alternative<Sessions::Verified>(verify(s, c)));
  EXPECT_EQ(code_of(verify(s, c, "other--z1--x-s3")), Code::kAccessDenied);
  EXPECT_EQ(code_of(s.verify(c.access_key, c.token, "b--z1--x-s3", sig.scope, sig.to_sign + "x",
                             sig.signature)),
            Code::kSignatureDoesNotMatch);
}

TEST_F(SessionsTest, AnyChangeToATokenMakesItInvalid) {
  Sessions s = make();
  const SessionCredentials c = s.create(alice_, "b--z1--x-s3", SessionMode::kReadOnly);
  auto bytes = aws::base64_decode(c.token);
  ASSERT_TRUE(bytes);
  // Every byte flipped in turn: the expiry, the mode, the nonce, the names, the tag.
  for (std::size_t i = 0; i < bytes->size(); ++i) {
    std::string changed = *bytes;
    changed[i] = static_cast<char>(changed[i] ^ 0x01);
    SessionCredentials forged = c;
    forged.token = aws::base64_encode(changed);
    EXPECT_EQ(code_of(verify(s, forged)), Code::kInvalidToken) << i;
  }
  for (std::string token : {std::string(), std::string("not base64!"), c.token.substr(0, 20),
                            aws::base64_encode(*bytes + "x"), std::string(4096, 'A')}) {
    SessionCredentials forged = c;
    forged.token = token;
    EXPECT_EQ(code_of(verify(s, forged)), Code::kInvalidToken) << token.substr(0, 30);
  }
  // Another session's access key (and secret) with this token.
  SessionCredentials mixed = s.create(alice_, "b--z1--x-s3", SessionMode::kReadOnly);
  mixed.token = c.token;
  EXPECT_EQ(code_of(verify(s, mixed)), Code::kInvalidToken);
  // Another server's key, or the user's secret changed since: the token no longer opens.
  Sessions elsewhere = make(std::string(32, 'j'));
  EXPECT_EQ(code_of(verify(elsewhere, c)), Code::kInvalidToken);
  alice_.secret_key = "rotated";
  Sessions after_rotation = make();
  EXPECT_EQ(code_of(verify(after_rotation, c)), Code::kInvalidToken);
}

TEST_F(SessionsTest, ATokenOfAKeptSessionIsStillCompared) {
  Sessions s = make();
  const SessionCredentials c = s.create(bob_, "b--z1--x-s3", SessionMode::kReadWrite);
  ASSERT_TRUE(std::holds_alternative<Sessions::Verified>(verify(s, c)));
  SessionCredentials forged = c;
  forged.token[10] = forged.token[10] == 'A' ? 'B' : 'A';
  EXPECT_EQ(code_of(verify(s, forged)), Code::kInvalidToken);
}

TEST_F(SessionsTest, ASessionExpiresFiveMinutesAfterItWasMadeByTheSessionClock) {
  Sessions s = make();
  const SessionCredentials c = s.create(alice_, "b--z1--x-s3", SessionMode::kReadWrite);
  ASSERT_TRUE(std::holds_alternative<Sessions::Verified>(verify(s, c)));
  s.advance(std::chrono::seconds(290));
  EXPECT_TRUE(std::holds_alternative<Sessions::Verified>(verify(s, c)));
  s.advance(std::chrono::seconds(11));
  EXPECT_EQ(code_of(verify(s, c)), Code::kExpiredToken);
  // The server's key is the same after a restart: an unexpired session is still good.
  Sessions restarted = make();
  const SessionCredentials fresh = s.create(alice_, "b--z1--x-s3", SessionMode::kReadWrite);
  restarted.advance(std::chrono::seconds(301));
  EXPECT_TRUE(std::holds_alternative<Sessions::Verified>(verify(restarted, fresh)));
  EXPECT_EQ(code_of(verify(restarted, c)), Code::kExpiredToken);
}

TEST_F(SessionsTest, AUserGoneTakesItsSessionsWithIt) {
  Sessions s = make();
  config::UserConfig carol;
  carol.name = "carol";
  carol.access_key = "CAROL";
  carol.secret_key = "carol-secret";
  const SessionCredentials c = s.create(carol, "b--z1--x-s3", SessionMode::kReadWrite);
  EXPECT_EQ(code_of(verify(s, c)), Code::kInvalidToken);
}

}  // namespace
}  // namespace hots3::s3
