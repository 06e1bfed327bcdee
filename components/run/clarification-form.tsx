"use client";

import { useState } from "react";
import { Alert, AlertDescription, AlertTitle } from "@/components/ui/alert";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardFooter, CardHeader, CardTitle } from "@/components/ui/card";
import { Checkbox } from "@/components/ui/checkbox";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { RadioGroup, RadioGroupItem } from "@/components/ui/radio-group";
import { Textarea } from "@/components/ui/textarea";
import type { Clarification, Run } from "@/components/runs/api";
import { useDecision } from "./use-decision";
import { DeadlineCountdown } from "./deadline-countdown";

const MAX_FILE_BYTES = 256 * 1024;

function toBase64(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] ?? "");
    reader.onerror = () => reject(reader.error ?? new Error("Could not read the file."));
    reader.readAsDataURL(file);
  });
}

/**
 * The typed inputs of a question (single / multiple choice, file, text) and a reader of the answer they hold: shared by
 * the question's own form and the escalated-question gate, so both ask in the same form.
 */
export function useTypedResponse({ responseType, options, idPrefix, labelledBy }: { responseType: string; options: string[]; idPrefix: string; labelledBy: string }) {
  const [text, setText] = useState("");
  const [single, setSingle] = useState("");
  const [multiple, setMultiple] = useState<string[]>([]);
  const [file, setFile] = useState<File | null>(null);
  const type = responseType;

  /** The answer as the API takes it, or what to fix. */
  const read = async (): Promise<{ response: unknown } | { error: string }> => {
    if (type === "single_choice") return single ? { response: single } : { error: "Choose one option." };
    if (type === "multiple_choice") return multiple.length ? { response: multiple } : { error: "Choose at least one option." };
    if (type === "file") {
      if (!file) return { error: "Choose a file to upload." };
      if (file.size > MAX_FILE_BYTES) return { error: `The file is ${Math.ceil(file.size / 1024)} KiB; the limit is 256 KiB.` };
      return { response: { fileName: file.name, contentBase64: await toBase64(file), ...(file.type ? { contentType: file.type } : {}) } };
    }
    return text.trim() ? { response: text.trim() } : { error: "Write an answer." };
  };

  const inputs = (
    <>
      {type === "single_choice" && (
        <RadioGroup value={single} onValueChange={setSingle} aria-labelledby={labelledBy}>
          {options.map((option, i) => (
            <div key={option} className="flex items-center gap-2">
              <RadioGroupItem value={option} id={`${idPrefix}-opt-${i}`} />
              <Label htmlFor={`${idPrefix}-opt-${i}`} className="font-normal">
                {option}
              </Label>
            </div>
          ))}
        </RadioGroup>
      )}
      {type === "multiple_choice" && (
        <fieldset className="space-y-2" aria-labelledby={labelledBy}>
          {options.map((option, i) => (
            <div key={option} className="flex items-center gap-2">
              <Checkbox
                id={`${idPrefix}-opt-${i}`}
                checked={multiple.includes(option)}
                onCheckedChange={(checked) => setMultiple((m) => (checked ? [...m, option] : m.filter((o) => o !== option)))}
              />
              <Label htmlFor={`${idPrefix}-opt-${i}`} className="font-normal">
                {option}
              </Label>
            </div>
          ))}
        </fieldset>
      )}
      {type === "file" && (
        <div className="grid gap-2">
          <Label htmlFor={`${idPrefix}-file`}>File (up to 256 KiB)</Label>
          <Input id={`${idPrefix}-file`} type="file" onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
        </div>
      )}
      {type !== "single_choice" && type !== "multiple_choice" && type !== "file" && (
        <div className="grid gap-2">
          <Label htmlFor={`${idPrefix}-text`}>Your answer</Label>
          <Textarea id={`${idPrefix}-text`} rows={4} value={text} onChange={(e) => setText(e.target.value)} />
        </div>
      )}
    </>
  );
  return { inputs, read };
}

/** A question from the run, answered in the form its response type asks for. */
export function ClarificationForm({ run, clarification }: { run: Run; clarification: Clarification }) {
  const decision = useDecision(run.id);
  const [error, setError] = useState<string | null>(null);
  const type = clarification.responseType;
  const typed = useTypedResponse({ responseType: type, options: clarification.options ?? [], idPrefix: "clr", labelledBy: "clarification-question" });

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    const answer = await typed.read();
    if ("error" in answer) return setError(answer.error);
    setError(null);
    decision.mutate({ url: `/api/clarifications/${clarification.id}/answer`, body: { response: answer.response }, success: "Answer sent; the run resumes" });
  };

  return (
    <Card className="border-amber-500/50" data-testid="clarification-form" data-response-type={type}>
      <form onSubmit={submit} noValidate>
        <CardHeader>
          <CardTitle>The {clarification.stage} stage asks</CardTitle>
          <CardDescription className="text-foreground text-base" id="clarification-question">
            {clarification.question}
          </CardDescription>
          {clarification.context && <p className="text-muted-foreground text-sm whitespace-pre-wrap">{clarification.context}</p>}
          <DeadlineCountdown deadline={clarification.deadline} />
        </CardHeader>
        <CardContent className="space-y-3 py-4">
          {typed.inputs}
          {error && (
            <p className="text-destructive text-xs" role="alert">
              {error}
            </p>
          )}
          {decision.error && (
            <Alert variant="destructive">
              <AlertTitle>The answer was not saved</AlertTitle>
              <AlertDescription>{decision.error.message}</AlertDescription>
            </Alert>
          )}
        </CardContent>
        <CardFooter className="gap-2">
          <Button type="submit" disabled={decision.isPending} data-testid="answer">
            Send answer
          </Button>
          <Button
            type="button"
            variant="ghost"
            disabled={decision.isPending}
            data-testid="skip-question"
            title="The agent proceeds with its best judgement and notes the assumption it made"
            onClick={() =>
              decision.mutate({ url: `/api/clarifications/${clarification.id}/skip`, success: "Skipped; the run proceeds with its best judgement" })
            }
          >
            Skip — proceed with best judgement
          </Button>
          {clarification.stage !== "planning" && (
            <Button
              type="button"
              variant="ghost"
              disabled={decision.isPending}
              data-testid="skip-to-planning"
              title="The planner re-plans with this question, and the new plan waits for approval at the plan gate"
              onClick={() =>
                decision.mutate({
                  url: `/api/clarifications/${clarification.id}/skip`,
                  body: { then: "planning" },
                  success: "Sent back to planning with the question",
                })
              }
            >
              Skip — send back to planning
            </Button>
          )}
        </CardFooter>
      </form>
    </Card>
  );
}
