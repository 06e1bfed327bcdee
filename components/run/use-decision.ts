"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { toast } from "sonner";
import { apiSend, runKeys } from "@/components/runs/api";

/** POST a decision and refresh the run; a 409 (someone decided first) or any error is shown as it came from the server. */
export function useDecision(runId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ url, body }: { url: string; body?: unknown; success?: string }) => apiSend(url, body),
    onSuccess: async (_data, { success }) => {
      if (success) toast.success(success);
      await Promise.all([
        queryClient.invalidateQueries({ queryKey: runKeys.detail(runId) }),
        queryClient.invalidateQueries({ queryKey: runKeys.inbox }),
        queryClient.invalidateQueries({ queryKey: ["runs"] }),
      ]);
    },
  });
}
