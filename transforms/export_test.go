package transforms

// MaxDecisions is the most decisions an explained request keeps, for the
// external tests.
const MaxDecisions = maxDecisions
