// Package logredact keeps secret material out of klog output at any
// verbosity. At -v=8 and above client-go logs every request and response
// body it sends or receives: Secrets written by Secret sync, Secrets read
// from the API, TokenRequests. Install replaces those bodies by their length
// before they are written (CVE-2023-2878 was a token leaked this way).
package logredact
