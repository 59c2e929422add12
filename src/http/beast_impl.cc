// Beast's implementation, compiled once (BOOST_BEAST_SEPARATE_COMPILATION, set on hots3_asio).
// Only src/http uses Beast; Asio's TLS is compiled in tls_impl.cc, with the server and client.
#include <boost/beast/src.hpp>
