/** Everyday turns unrelated to anything a test asks about: they fill an agent's budget so older entries fade. */
export const FILLER_TURNS = [
  "The weather was grey and the bus was late again this morning.",
  "Remember to water the tomatoes on the balcony before noon.",
  "The quarterly tax report is due at the end of the month.",
  "We talked about repainting the kitchen a pale green colour.",
  "My brother keeps asking about the football tickets for Sunday.",
  "The laptop fan is noisy whenever the build runs for long.",
] as const
