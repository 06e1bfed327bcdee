"use client";

import { Alert, AlertDescription, AlertTitle } from "@/components/ui/alert";

/** A decision or action the server refused: its message, as the run page's cards show it. */
export function ErrorNote({ error }: { error: Error | null }) {
  if (!error) return null;
  return (
    <Alert variant="destructive">
      <AlertTitle>That did not go through</AlertTitle>
      <AlertDescription>{error.message}</AlertDescription>
    </Alert>
  );
}
